"""Guard rails on real trainers: stop_on stops training with a checkpoint, notices reach a webhook.

The webhook is a receiver on 127.0.0.1. Detection happens on the converter's thread at a drain, so
each test drives a flush right after the planted NaN instead of waiting for the schedule.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from benchmarks._webhooks import receiver, silent_endpoint
from traincard_otel._read.payload import build_payload
from traincard_otel._schema import Attr, Event


def _events(run: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in run.events if e["name"] == name]


def _no_secret(store: Path, secret: str) -> None:
    for f in store.rglob("*"):
        if f.is_file():
            assert secret not in f.read_bytes().decode("utf-8", "replace"), f


@pytest.mark.slow
def test_hf_trainer_stops_on_a_nan_with_a_checkpoint(store_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    import torch
    from transformers import TrainerCallback

    from examples.tiny_gpt2 import trainer as make_trainer

    nan_at = 3

    class PlantNan(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == nan_at - 1:  # the next step's loss and gradients are NaN
                with torch.no_grad():
                    model.transformer.wte.weight.fill_(float("nan"))

        def on_log(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == nan_at:
                traincard_otel.active_reporter().flush()  # the drain that judges the NaN, now

    with receiver() as hook:
        traincard_otel.configure(stop_on="nan", notify=hook.url)
        trainer = make_trainer(
            str(tmp_path / "out"),
            max_steps=30,
            logging_steps=1,
            eval_strategy="no",
            save_strategy="no",
            logging_nan_inf_filter=False,
            per_device_train_batch_size=4,
        )
        trainer.add_callback(PlantNan())
        traincard_otel.instrument(trainer)
        trainer.train()
        traincard_otel.shutdown()
        stopped = trainer.state.global_step
        assert nan_at < stopped <= nan_at + 2  # within two steps of the NaN
        checkpoint = tmp_path / "out" / f"checkpoint-{stopped}"
        assert (checkpoint / "trainer_state.json").exists()

        run = traincard_otel.load(store_dir)
        status = run.status
        assert status["status"] == "stopped_early"
        guards = status["guards"]
        assert guards["stop_on"] == ["nan"] and guards["trigger"]["kind"] == "nan"
        assert guards["checkpoint"] == str(checkpoint)
        assert [a["action"] for a in guards["actions"]] == [
            "stop requested",
            "checkpoint saved",
            "stopped early",
        ]
        (end,) = _events(run, Event.RUN_STOPPED_EARLY)
        assert end["attributes"][Attr.GUARD_TRIGGER] == "nan" and end["attributes"][
            Attr.CHECKPOINT_PATH
        ] == str(checkpoint)
        assert (
            end["attributes"][Attr.STEP] == stopped and end["attributes"][Attr.GUARD_TRIGGER_STEP] == nan_at
        )
        assert len(_events(run, Event.GUARD_STOP_REQUESTED)) == 1
        banners = [(b["kind"], b["text"]) for b in build_payload(run)["banners"]]
        assert any(k == "stopped_early" and str(checkpoint) in t and "nan" in t for k, t in banners), banners
        assert ("guards", "Armed: stop on nan; notify 1 webhook(s) of every kind: ") in [
            (k, t[: len("Armed: stop on nan; notify 1 webhook(s) of every kind: ")]) for k, t in banners
        ]
        assert [t.split(" at ")[0] for k, t in banners if k == "guards"][1:] == [
            "Stop requested",
            "Checkpoint saved",
            "Stopped early",
        ]

        notice = hook.wait_for("stopped_early")
        assert notice["step"] == stopped and str(checkpoint) in notice["text"]
        nan = hook.wait_for("nan")
        assert nan["step"] == nan_at and nan["rank"] == 0 and nan["value"] == "nan"
        assert "run_end" not in hook.kinds()  # the early stop is the run's end notice
        assert all(p == "/hooks/secret-token-XYZ" for p in hook.paths)
        _no_secret(store_dir, "secret-token-XYZ")


@pytest.mark.slow
def test_lightning_stops_on_a_nan_with_a_checkpoint(store_dir: Path, tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    import torch

    nan_at = 4

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            if self.global_step == nan_at:  # the step after the NaN's: judge it now
                traincard_otel.active_reporter().flush()
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            if self.global_step == nan_at - 1:
                loss = loss * float("nan")
            self.log("train_loss", loss, on_step=True, on_epoch=False)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.05)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 4, generator=g)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8
    )
    traincard_otel.configure(stop_on=["nan", "loss_spike"])
    trainer = pl.Trainer(
        max_steps=30,
        log_every_n_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        accelerator="cpu",
    )
    traincard_otel.instrument(trainer)
    trainer.fit(Regressor(), data)
    traincard_otel.shutdown()
    assert nan_at <= trainer.global_step <= nan_at + 2
    (checkpoint,) = (tmp_path / "checkpoints").glob("stopped-early-step=*.ckpt")
    run = traincard_otel.load(store_dir)
    assert run.status["status"] == "stopped_early"
    assert run.status["guards"]["checkpoint"] == str(checkpoint)
    assert [c["path"] for c in run.checkpoints] == [str(checkpoint)]


@pytest.mark.slow
def test_raw_loop_reads_should_stop_and_a_failure_and_a_stall_are_notified_once(
    store_dir: Path, tmp_path: Path
) -> None:
    import torch

    with receiver() as hook:
        reporter = traincard_otel.configure(
            stop_on="nan", notify=hook.url, notify_on="nan,stall,failure,run_end"
        )
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        tracker = traincard_otel.instrument(opt)
        stopped_at = None
        for step in range(1, 31):
            x = torch.randn(8, 4)
            loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            tracker.log(loss=float("nan") if step == 5 else loss.item(), batch=x)
            reporter.flush()  # judged now, not at the schedule's next tick
            if tracker.should_stop:
                tracker.save(model.state_dict(), str(tmp_path / f"step-{step}.pt"))
                stopped_at = step
                break
        assert stopped_at is not None and 5 <= stopped_at <= 6
        assert reporter.should_stop and reporter.stop_reason.startswith("nan: ")  # type: ignore[union-attr]

        # A stall (the watchdog's clock driven forward) and a failure, each notified once.
        pipeline = reporter._pipeline
        assert pipeline is not None
        pipeline.watchdog.check_stall(now=time.time())
        pipeline.watchdog.check_stall(now=time.time() + 1000)
        pipeline.watchdog.check_stall(now=time.time() + 1001)
        reporter.flush()
        for _ in range(2):
            reporter.failure(RuntimeError("boom"))
        traincard_otel.shutdown()
        assert hook.wait_for("failure")["text"].endswith("RuntimeError: boom")
        assert "no step progress for 10" in hook.wait_for("stall")["text"]
        kinds = hook.kinds()
        assert sorted(kinds) == ["failure", "nan", "stall"], kinds  # no run_end: the run failed
        run = traincard_otel.load(store_dir)
        assert run.status["status"] == "failed"
        notifications = run.status["guards"]["notifications"]
        # The last state is written while the last notice may still be on its way.
        assert notifications["webhooks"] == 1 and notifications["failed"] == 0
        assert notifications["sent"] + notifications["pending"] == 3
        assert run.status["guards"]["checkpoint"] == str(tmp_path / f"step-{stopped_at}.pt")
        _no_secret(store_dir, "secret-token-XYZ")


@pytest.mark.slow
def test_a_silent_webhook_never_holds_a_step_and_exit_waits_at_most_the_bound(store_dir: Path) -> None:
    with silent_endpoint() as url:
        reporter = traincard_otel.configure(notify=url, shutdown_timeout_s=1.0)
        for step in range(1, 41):
            reporter.metrics({"loss": float("nan") if step % 2 else 1.0}, step=step)
            reporter.step_end(step, duration_s=0.01)
            if step % 10 == 0:
                reporter.flush()
        assert reporter.step == 40  # the loop ran through; benchmarks/bench_notify.py times it
        t0 = time.monotonic()
        traincard_otel.shutdown()
        assert time.monotonic() - t0 < 1.0 + 2.0  # the bound, plus slack for a loaded machine
    status = json.loads(next(store_dir.rglob("state.json")).read_text())
    counts = status["guards"]["notifications"]
    assert counts["failed"] + counts["pending"] >= 1 and counts["sent"] == 0
    assert url not in json.dumps(status)


@pytest.mark.slow
def test_a_gang_notifies_once_naming_the_failed_rank(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    from tests.support.helpers import REPO, subprocess_env

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed next to this interpreter")
    with receiver() as hook:
        proc = subprocess.run(
            [
                torchrun,
                "--nproc_per_node=2",
                "--max-restarts=0",
                str(REPO / "tests/integration/scripts/gang_notify.py"),
            ],
            env=subprocess_env(
                TRAINCARD_DIR=str(tmp_path / "store"),
                TRAINCARD_SYSTEM="false",
                TRAINCARD_NOTIFY=hook.url,
                TRAINCARD_SHUTDOWN_TIMEOUT="2",
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode != 0  # rank 1 failed
        hook.wait_for("failure")
        time.sleep(0.5)  # anything sent twice would be here by now
        kinds = hook.kinds()
        assert kinds.count("nan") == 1 and kinds.count("failure") == 1, (kinds, proc.stderr[-2000:])
        assert {b["rank"] for b in hook.bodies if b["kind"] == "nan"} == {0}  # only rank 0 sends
        failure = hook.wait_for("failure")
        assert failure["rank"] == 1 and "rank 1 exited with 3" in failure["text"]
    _no_secret(tmp_path / "store", "secret-token-XYZ")
