"""The Lightning adapter's helpers on real tensors and a real Trainer (the fits: tests/integration)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel.adapters.lightning import batch_reader, precision_dtype, step_progress
from traincard_otel.exceptions import TraincardError

torch = pytest.importorskip("torch")


def test_batch_reader_finds_the_samples_and_the_token_ids() -> None:
    ids = torch.zeros(4, 32, dtype=torch.int64)
    features = torch.zeros(4, 32)
    assert batch_reader(ids) == ((), True)  # (batch, sequence) of token ids
    assert batch_reader(features) == ((), False)
    assert batch_reader(torch.zeros(4, 3, 8, 8, dtype=torch.int64)) == ((), False)  # not (batch, seq)
    assert batch_reader((features, torch.zeros(4))) == ((0,), False)
    assert batch_reader({"attention_mask": ids, "input_ids": ids}) == (("input_ids",), True)
    assert batch_reader({"meta": ["a"], "x": [features]}) == (("x", 0), False)
    assert batch_reader([None, {"pixels": features}]) == ((1, "pixels"), False)
    assert batch_reader(torch.tensor(1.0)) is None and batch_reader(["text"]) is None


def test_batches_laid_out_otherwise_than_the_last_are_read_afresh() -> None:
    from traincard_otel.adapters.lightning import StepTaps

    taps = StepTaps(traincard_otel.configure(), trainer=None)
    ids = torch.zeros(4, 32, dtype=torch.int64)
    assert taps.count({"input_ids": ids}) == (4, 128) and taps.path == ("input_ids",)
    assert taps.count({"pixels": torch.zeros(2, 3)}) == (2, 0) and taps.path == ("pixels",)
    assert taps.count(["no tensor"]) == (0, 0) and taps.path is None


def test_logged_dicts_read_off_the_thread_as_lightning_gives_its_loggers() -> None:
    from traincard_otel.adapters.lightning import StepTaps

    taps = StepTaps(traincard_otel.configure(), trainer=None)
    loss = torch.tensor(0.25)
    taps.pending.extend(
        [
            ({"loss": loss, "epoch": torch.tensor(1.0)}, None, 7),  # Lightning's default step
            ({"loss": loss, "step": torch.tensor(40.0)}, None, 8),  # a logged "step" is the step
            ({"val_acc": loss, "bad": torch.ones(3)}, 9, 9),  # an eval name; a non-scalar kept
            ({"step": torch.tensor(3.0)}, None, 10),  # nothing but the step: no report
        ]
    )
    reports = taps.logged_metrics()
    assert reports[:2] == [({"loss": 0.25}, 7, "train"), ({"loss": 0.25}, 40, "train")]
    values, step, phase = reports[2]
    assert values["val_acc"] == 0.25 and values["bad"] is not None and (step, phase) == (9, "eval")
    assert len(reports) == 3 and not taps.pending


def test_precision_dtype_follows_the_trainer_precision() -> None:
    module = torch.nn.Linear(2, 2)
    assert precision_dtype("bf16-mixed", module) == precision_dtype("bf16-true", module) == "bf16"
    assert precision_dtype("16-mixed", module) == precision_dtype("16-true", module) == "fp16"
    assert precision_dtype("transformer-engine", module) == "fp8"
    assert precision_dtype("64-true", module) == "fp64"  # no table figure: the peak is unknown
    assert precision_dtype("32-true", module) == "fp32"  # on a CPU; CUDA with TF32: tf32


def test_step_progress_reads_the_loop_counter_or_else_the_global_step() -> None:
    pl = pytest.importorskip("lightning.pytorch")
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    module = pl.LightningModule()
    counter = step_progress(trainer, module)
    counter.completed = 7  # the optimization loop's counter is what trainer.global_step reads
    assert trainer.global_step == 7
    # a Trainer laid out otherwise (no such loop): trainer.global_step itself
    other = types.SimpleNamespace(fit_loop=types.SimpleNamespace(epoch_loop=None), global_step=3)
    assert step_progress(other, module).completed == 3


def test_a_lightning_without_the_logger_connector_fails_at_instrument(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False)
    monkeypatch.delattr(trainer, "_logger_connector")
    with pytest.raises(TraincardError, match=r"_logger_connector\.log_metrics"):
        traincard_otel.instrument(trainer)
