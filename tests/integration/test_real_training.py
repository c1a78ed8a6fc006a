"""Training as people run it, on the CPU with real frameworks, tiny models built from configs and
synthetic data: the HF Trainer with gradient accumulation and DataLoader workers, a
``torch.compile``d model, bf16 (the Trainer's ``bf16=True`` and ``torch.autocast`` in a raw loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.efficiency import efficiency
from traincard_otel._analysis.flops import model_flops

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

PEAK = 1e12  # TRAINCARD_PEAK_FLOPS: a CPU has no table entry, and MFU needs a peak


def _efficiency(run: traincard_otel.RunData) -> dict[str, Any] | None:
    """The card's efficiency figures (MFU and what it is made of) as a dict."""
    e = efficiency(run)
    return e.as_dict() if e is not None else None


def _per_step(run: traincard_otel.RunData, kind: str) -> list[float]:
    """Samples or tokens of each step: its throughput times its step time."""
    rates, times = run.throughput[f"{kind}_per_second{{rank=0}}"], run.step_times[0]
    assert rates.steps == times.steps
    return [r * d for r, d in zip(rates.values, times.values, strict=True)]


@pytest.mark.slow
def test_hf_gradient_accumulation_with_dataloader_workers_counts_optimizer_steps_and_every_micro_batch(
    store_dir: Path, tmp_path: Path
) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(
        str(tmp_path / "out"),
        max_steps=6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=3,
        dataloader_num_workers=2,
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert trainer.state.global_step == 6
    assert run.step_times[0].steps == list(range(1, 7))  # a step is an optimizer step
    assert _per_step(run, "samples") == pytest.approx([3 * 4] * 6)  # three micro-batches of four
    assert _per_step(run, "tokens") == pytest.approx([3 * 4 * 32] * 6)
    assert run.metrics["loss"].steps == list(range(1, 7))
    assert run.metrics["loss"].values == [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert run.status["step"] == 6 and run.status["progress"]["batch_size"] == 12


def _raw_loop(model: object, steps: int, *, autocast: bool = False) -> list[float]:
    """A hand-written loop over synthetic token batches, instrumented with ``model=`` for MFU."""
    assert isinstance(model, torch.nn.Module)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = traincard_otel.instrument(opt, model=model)
    losses = []
    for _ in range(steps):
        ids = torch.randint(0, 64, (8, 32))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch={"input_ids": ids})  # type: ignore[attr-defined]
        losses.append(loss.item())
    tracker.close()  # type: ignore[attr-defined]
    return losses


@pytest.mark.slow
def test_a_compiled_model_has_the_model_flops_of_the_model_it_compiles(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.tiny_gpt2 import tiny_gpt2

    monkeypatch.setenv("TRAINCARD_PEAK_FLOPS", str(PEAK))
    torch.manual_seed(0)
    model = tiny_gpt2()
    # aot_eager: Dynamo's capture and AOT autograd, as the default backend runs them, without
    # Inductor's C++ code generation (minutes per graph on a small CPU machine). What instrument()
    # reads is the compiled wrapper either way.
    compiled = torch.compile(model, backend="aot_eager")
    assert type(compiled) is not type(model)
    assert model_flops(compiled) == model_flops(model)
    losses = _raw_loop(compiled, 5)
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].values == pytest.approx(losses)
    params = sum(p.numel() for p in model.parameters())
    progress = run.status["progress"]
    assert progress["flops_per_token"] == 6 * params
    assert progress["attention_flops_per_position"] == 12 * 2 * 64  # L x d of the config
    assert progress["compute_dtype"] == "fp32"
    e = _efficiency(run)
    assert e is not None and e["seq_len"] == pytest.approx(32)
    assert e["flops_per_token"] == pytest.approx(6 * params + 12 * 2 * 64 * 32)
    assert e["mfu"] == pytest.approx(e["flops_per_token"] * e["ranks"][0]["tokens_per_s"] / PEAK)


@pytest.mark.slow
def test_bf16_autocast_in_a_raw_loop_is_the_precision_of_the_mfu(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.tiny_gpt2 import tiny_gpt2

    monkeypatch.setenv("TRAINCARD_PEAK_FLOPS", str(PEAK))
    torch.manual_seed(0)
    model = tiny_gpt2()
    losses = _raw_loop(model, 5, autocast=True)
    assert next(model.parameters()).dtype == torch.float32  # autocast, not a bf16 model
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].values == pytest.approx(losses)
    assert run.status["progress"]["compute_dtype"] == "bf16"
    e = _efficiency(run)
    assert e is not None and e["dtype"] == "bf16" and e["mfu"] is not None and e["mfu"] > 0


@pytest.mark.slow
def test_hf_bf16_on_the_cpu_is_the_precision_of_the_mfu(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    monkeypatch.setenv("TRAINCARD_PEAK_FLOPS", str(PEAK))
    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=6, bf16=True, logging_steps=1, eval_strategy="no", save_strategy="no"
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].values == [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert run.status["progress"]["compute_dtype"] == "bf16"
    e = _efficiency(run)
    assert e is not None and e["dtype"] == "bf16"
    assert e["mfu"] == pytest.approx(e["flops_per_token"] * e["ranks"][0]["tokens_per_s"] / PEAK)
