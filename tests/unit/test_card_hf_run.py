"""The card of a real HF Trainer run (tiny GPT-2 on CPU): epoch progress, the summary table."""

from __future__ import annotations

from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import HF_BOOKKEEPING

pytest.importorskip("transformers")


@pytest.mark.slow
def test_hf_run_with_max_steps_shows_real_epochs_and_one_summary_table(
    store_dir: Path, tmp_path: Path
) -> None:
    from transformers import Trainer

    from traincard_otel._read.payload import build_payload

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    # 128 samples / 16 per step = 8 steps per epoch: max_steps=30 ends at epoch 3.75, while the
    # Trainer's num_train_epochs keeps its default of 3 (the card used to say "Epoch 3.75 / 3").
    args = training_args(str(tmp_path / "out"), max_steps=30, logging_steps=2, eval_steps=10, save_steps=100)
    trainer = Trainer(
        model=tiny_gpt2(),
        args=args,
        train_dataset=ProgressionDataset(128),
        eval_dataset=ProgressionDataset(32, seed=1),
    )
    assert args.num_train_epochs == 3
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()

    payload = build_payload(traincard_otel.load(store_dir), final=True)
    run = payload["run"]
    assert trainer.state.epoch == pytest.approx(3.75)
    assert run["epoch"] == pytest.approx(3.75) and run["num_epochs"] == pytest.approx(3.75)
    charts = {c["id"]: c for c in payload["charts"]}
    summary = {row["name"] for row in payload["summary"]}
    bookkeeping = {*HF_BOOKKEEPING, "train_loss"}
    assert bookkeeping <= summary
    assert not bookkeeping & set(charts) and "runtime" not in charts and "samples_per_second" not in charts
    assert {"loss", "learning_rate", "grad_norm"} <= set(charts)
    assert [s["label"] for s in charts["loss"]["series"]] == ["train", "eval"]
    assert all(c["unit"] for c in payload["charts"])
