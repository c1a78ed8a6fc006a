"""A real transformers.Trainer on a tiny GPT-2 (CPU), instrumented in one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._schema import Event

pytest.importorskip("transformers")


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@pytest.mark.slow
def test_store_holds_exactly_what_the_trainer_logged(store_dir: Path, tmp_path: Path) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(str(tmp_path / "out"), max_steps=30, logging_steps=2, eval_steps=10, save_steps=15)
    handle = traincard_otel.instrument(trainer)
    assert traincard_otel.instrument(trainer) is handle  # idempotent
    assert "on_log" not in vars(trainer.callback_handler)  # logs are read from the log history
    trainer.train()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    history = trainer.state.log_history
    for key in ("loss", "learning_rate", "grad_norm", "eval_loss"):
        expected = [(h["step"], h[key]) for h in history if key in h]
        got = list(zip(run.metrics[key].steps, run.metrics[key].values, strict=True))
        assert got == expected, key  # floats survive the JSON round trip exactly
    assert run.metrics["loss"].steps == [h["step"] for h in history if "loss" in h]
    # Train metrics are timed at their step's end, eval metrics at the end of their eval phase.
    step_end = dict(zip(run.step_times[0].steps, run.step_times[0].times, strict=True))
    assert run.metrics["loss"].times == [step_end[s] for s in run.metrics["loss"].steps]

    phases = {p["n"]: p for p in run.phases}
    evals = [p for p in run.phases if p["n"] == "training.eval"]
    saves = [p for p in run.phases if p["n"] == "training.save"]
    assert len(evals) == 3 and all(p["t1"] > p["t0"] for p in evals)
    for t, phase in zip(run.metrics["eval_loss"].times, evals, strict=True):
        assert phase["t0"] < t <= phase["t1"]
    assert len(saves) == 2 and all(p["t1"] > p["t0"] for p in saves)
    assert "training.train" in phases and "training.run" in phases

    assert [c["step"] for c in run.checkpoints] == [15, 30]
    for c in run.checkpoints:
        assert c["size_bytes"] == _dir_size(Path(c["path"]))
        assert c["metric"] == "eval_loss"
    assert sum(c["best"] for c in run.checkpoints) >= 1

    status = run.status
    assert status["status"] == "finished" and status["step"] == 30
    progress = status["progress"]
    assert progress["max_steps"] == 30 and progress["batch_size"] == 16 and progress["world_size"] == 1
    assert run.step_times[0].steps[-1] == 30
    # The TrainingArguments set away from their defaults are the run's hyperparameters (sweeps).
    [hyper] = [e["body"] for e in run.events if e["name"] == Event.HYPERPARAMS]
    assert hyper["max_steps"] == "30" and hyper["eval_steps"] == "10" and "output_dir" not in hyper
    # Tokens and samples come from each step's batch: 16 sequences of 32 tokens.
    tokens = run.throughput["tokens_per_second{rank=0}"]
    samples = run.throughput["samples_per_second{rank=0}"]
    assert len(tokens) == len(samples) == 30
    assert all(t == pytest.approx(32 * n) for t, n in zip(tokens.values, samples.values, strict=True))
    durations = run.step_times[0].values
    assert samples.values == pytest.approx([16 / d for d in durations[-len(samples) :]])


@pytest.mark.slow
def _train_raising_at_step_6(tmp_path: Path, exc: BaseException) -> Any:
    """A tiny trainer whose callback raises ``exc`` at the end of step 6, trained (``exc`` caught)."""
    from transformers import TrainerCallback

    from examples.tiny_gpt2 import trainer as make_trainer

    class Raise(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == 6:
                raise exc

    trainer = make_trainer(str(tmp_path / "out"), max_steps=20, logging_steps=2)
    trainer.add_callback(Raise())
    traincard_otel.instrument(trainer)
    with pytest.raises(type(exc)):
        trainer.train()
    traincard_otel.shutdown()
    return trainer


def test_exception_in_training_is_recorded_once(store_dir: Path, tmp_path: Path) -> None:
    oom = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    trainer = _train_raising_at_step_6(tmp_path, oom)
    run = traincard_otel.load(store_dir)
    failure = run.status["failure"]
    assert failure["type"] == "RuntimeError" and failure["step"] == 6
    assert failure["verdict"]["kind"] == "cuda_oom"
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert run.metrics["loss"].steps == [h["step"] for h in logged] == [2, 4]  # step 6 failed before its log
    assert failure["last_metrics"]["loss"] == logged[-1]["loss"]
    assert sum(1 for e in run.events if e["name"] == "traincard.run.failed") == 1
    assert run.status["status"] == "failed"
    assert os.path.isdir(tmp_path / "out")


def test_an_interrupted_trainer_ends_terminated_by_sigint(store_dir: Path, tmp_path: Path) -> None:
    _train_raising_at_step_6(tmp_path, KeyboardInterrupt())
    run = traincard_otel.load(store_dir)
    assert run.status["status"] == "terminated" and run.status["terminated_by"] == "SIGINT"
    assert run.status.get("failure") is None and run.status["step"] == 6
    assert not [e for e in run.events if e["name"] == "traincard.run.failed"]


@pytest.mark.slow
def test_eval_metrics_logged_before_a_failure_are_kept(store_dir: Path, tmp_path: Path) -> None:
    from transformers import TrainerCallback

    from examples.tiny_gpt2 import trainer as make_trainer

    class FailAfterEval(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            raise RuntimeError("metric server down")

    trainer = make_trainer(str(tmp_path / "out"), max_steps=20, logging_steps=2, eval_steps=4, save_steps=100)
    trainer.add_callback(FailAfterEval())
    traincard_otel.instrument(trainer)
    with pytest.raises(RuntimeError, match="metric server down"):
        trainer.train()
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    logged = trainer.state.log_history
    assert [h["step"] for h in logged if "eval_loss" in h] == [4]
    assert run.metrics["eval_loss"].values == [h["eval_loss"] for h in logged if "eval_loss" in h]
    assert run.metrics["loss"].steps == [2, 4]
    assert run.status["failure"]["last_metrics"]["eval_loss"] == run.metrics["eval_loss"].values[0]


@pytest.mark.slow
def test_resume_from_checkpoint_is_a_rewind_and_both_stretches_are_kept(
    store_dir: Path, tmp_path: Path
) -> None:
    from traincard_otel._read.payload import build_payload

    from examples.tiny_gpt2 import trainer as make_trainer

    out = str(tmp_path / "out")
    first = make_trainer(out, max_steps=30, logging_steps=2, eval_steps=100, save_steps=15)
    traincard_otel.instrument(first)
    first.train()
    second = make_trainer(out, max_steps=30, logging_steps=2, eval_steps=100, save_steps=15)
    traincard_otel.instrument(second)
    second.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-15"))
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    resumed = [e for e in run.events if e["name"] == "traincard.run.resumed"]
    assert [e["attributes"]["traincard.step"] for e in resumed] == [15]
    rewinds = [e["attributes"] for e in run.events if e["name"] == "traincard.run.rewind"]
    assert [(r["traincard.rewind.from"], r["traincard.step"]) for r in rewinds] == [(30, 16)]
    steps = run.metrics["loss"].steps
    assert steps == list(range(2, 31, 2)) + list(range(16, 31, 2))  # nothing overwritten
    loss = next(c for c in build_payload(run)["charts"] if c["id"] == "loss")
    train = [s for s in loss["series"] if s["label"].startswith("train")]
    assert [s["label"] for s in train] == ["train", "train (resumed 1)"]
    assert train[1]["x"][0] == 16
    assert any(m["kind"] == "rewind" and m["x"] == 15 for m in build_payload(run)["markers"])


@pytest.mark.slow
def test_time_spent_waiting_for_batches_is_measured_and_flags_input_bound_training(
    store_dir: Path, tmp_path: Path
) -> None:
    import time

    from examples.tiny_gpt2 import ProgressionDataset
    from examples.tiny_gpt2 import trainer as make_trainer

    class SlowDataset(ProgressionDataset):
        def __getitem__(self, i: int) -> dict[str, object]:
            time.sleep(0.025)  # a slow input pipeline: 100 ms per batch of 4 (input-bound under load too)
            return super().__getitem__(i)

    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=20, logging_steps=5, per_device_train_batch_size=4
    )
    trainer.train_dataset = SlowDataset(256)
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.status["input_bound_share"] >= 0.5
    assert run.step_times[0].steps[-1] == 20


@pytest.mark.slow
def test_closing_the_handle_puts_the_trainer_back_as_it_was(store_dir: Path, tmp_path: Path) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=6, logging_steps=1, eval_steps=100, save_steps=100
    )
    callbacks = list(trainer.callback_handler.callbacks)
    handle = traincard_otel.instrument(trainer)
    assert trainer.callback_handler.callbacks == callbacks  # the Trainer's own list is left alone
    trainer.train()
    handle.close()
    assert "training_step" not in vars(trainer) and "train" not in vars(trainer)
    assert not {"on_step_end", "on_log", "on_save"} & set(vars(trainer.callback_handler))
    trainer.train()  # a second run from step 0, not reported
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == [1, 2, 3, 4, 5, 6]
    assert run.step_times[0].steps == [1, 2, 3, 4, 5, 6]
    assert [p["n"] for p in run.phases].count("training.train") == 1


def test_logged_dicts_are_read_with_their_numbers_only(store_dir: Path, tmp_path: Path) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(str(tmp_path / "out"), max_steps=2, logging_steps=1)
    handle = traincard_otel.instrument(trainer)
    trainer.log({"custom": 1.5, "note": "not a number", "flag": True, "count": 3})
    trainer.log({"note": "nothing else"})
    handle.close()
    trainer.log({"custom": 2.5})  # after close: not reported
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.metrics["custom"].values == [1.5] and run.metrics["custom"].steps == [0]
    assert run.metrics["count"].values == [3.0]
    assert not {"note", "flag"} & set(run.metrics)
    assert not run.status["rejected"]  # what the Trainer logs that is not a number is not bad input


def _reported_once(run: Any, trainer: Any, steps: int) -> None:
    """Every point the Trainer logged is in ``run`` exactly once, as are its steps, phases and saves."""
    history = trainer.state.log_history
    for key in ("loss", "eval_loss"):
        expected = [(h["step"], h[key]) for h in history if key in h]
        assert (
            expected and list(zip(run.metrics[key].steps, run.metrics[key].values, strict=True)) == expected
        )
    assert run.step_times[0].steps == list(range(1, steps + 1))
    names = [p["n"] for p in run.phases]
    assert names.count("training.train") == 1
    assert names.count("training.eval") == len([h for h in history if "eval_loss" in h])
    assert [c["step"] for c in run.checkpoints] == [steps]
    assert run.status["status"] == "finished" and run.status["step"] == steps


@pytest.mark.slow
def test_autolog_and_instrument_report_a_trainer_once(
    autologging: None, store_dir: Path, tmp_path: Path
) -> None:
    from traincard_otel.adapters._registry import instrumented

    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(str(tmp_path / "out"), max_steps=6, logging_steps=2, eval_steps=3, save_steps=6)
    handle = instrumented(trainer)  # by autolog(), at the Trainer's making
    assert handle is not None and traincard_otel.instrument(trainer) is handle
    assert instrumented(trainer.accelerator) is None  # the Trainer's own Accelerator is the Trainer's
    trainer.train()
    traincard_otel.shutdown()
    _reported_once(traincard_otel.load(store_dir), trainer, 6)

    traincard_otel.autolog(disable=True)
    assert instrumented(make_trainer(str(tmp_path / "later"), max_steps=1)) is None


@pytest.mark.slow
def test_hf_callback_passed_to_the_trainer(store_dir: Path, tmp_path: Path) -> None:
    from transformers import Trainer

    from traincard_otel.integrations import HFCallback

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    callback = HFCallback()
    trainer = Trainer(
        model=tiny_gpt2(),
        args=training_args(str(tmp_path / "out"), max_steps=6, logging_steps=2, eval_steps=3, save_steps=6),
        train_dataset=ProgressionDataset(256),
        eval_dataset=ProgressionDataset(64, seed=1),
        callbacks=[callback],
    )
    # Bound at the end of the Trainer's making, and called through the handler's wrapped events
    # rather than from its list (where it would also cost every step's dispatch).
    assert callback.trainer is trainer and callback not in trainer.callback_handler.callbacks
    assert traincard_otel.instrument(trainer).callback is callback  # the same adapter: once
    trainer.train()
    traincard_otel.shutdown()
    _reported_once(traincard_otel.load(store_dir), trainer, 6)


def test_hf_callback_with_autolog_is_one_adapter(autologging: None, store_dir: Path, tmp_path: Path) -> None:
    from transformers import Trainer

    from traincard_otel.adapters._registry import instrumented
    from traincard_otel.integrations import HFCallback

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    first, second = HFCallback(), HFCallback()
    trainer = Trainer(
        model=tiny_gpt2(),
        args=training_args(str(tmp_path / "out"), max_steps=1),
        train_dataset=ProgressionDataset(16),
        eval_dataset=ProgressionDataset(16),
        callbacks=[first, second],
    )
    handle = instrumented(trainer)
    assert handle is not None and handle.callback is first and second.trainer is None
    assert not [c for c in trainer.callback_handler.callbacks if isinstance(c, HFCallback)]
    late = HFCallback()
    trainer.add_callback(late)  # after the making: at its first event it finds the Trainer reported
    trainer.evaluate()
    assert late.trainer is None and late not in trainer.callback_handler.callbacks


def test_a_bad_setting_on_the_callback_stops_the_trainers_making(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import Trainer

    from traincard_otel.integrations import HFCallback

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    with pytest.raises(TypeError, match="flush_every"):
        HFCallback(flush_every=3)  # a name configure() does not take: at once
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # as in production: internal errors are only logged
    with pytest.raises(traincard_otel.ConfigError, match="bogus"):
        Trainer(  # a value that is not valid: when the callback binds, at the end of the making
            model=tiny_gpt2(),
            args=training_args(str(tmp_path / "out"), max_steps=1, eval_strategy="no"),
            train_dataset=ProgressionDataset(16),
            callbacks=[HFCallback(stop_on="bogus")],
        )
