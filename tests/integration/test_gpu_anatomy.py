"""The step anatomy, profiles and memory at an OOM on a real GPU (``make gpu-check``; skipped where
torch sees no CUDA device): the parts timed with CUDA events read off the training thread, a
capture with the device's activity and its breakdown, and the allocator's snapshot saved at a
CUDA out-of-memory error with the verdict naming the allocations."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.anatomy import step_anatomy
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.telemetry.profiler import Ask

from tests.support.helpers import subprocess_env

pytestmark = pytest.mark.gpu


def _loop(torch: Any, store: Path, steps: int, ask_at: int | None = None) -> type:
    """Train on the GPU; the type of the clock the anatomy timed the parts with."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    tracker = traincard_otel.instrument(
        opt, model=model, store=str(store), system=False, capture_console=False
    )
    pipeline = _pipeline.active()
    assert pipeline is not None and pipeline.profiling is not None
    for step in range(1, steps + 1):
        if step == ask_at:
            pipeline.profiling.capture.ask(Ask(id="gpu-capture", steps=3))
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=x)
    pipeline.profiling.capture.close(60)
    clock = type(pipeline.queue.parts)
    traincard_otel.shutdown()
    return clock


def test_the_parts_are_timed_on_the_device(cuda: Any, tmp_path: Path) -> None:
    from traincard_otel.adapters._anatomy import DeviceClock

    assert _loop(cuda, tmp_path / "store", 40) is DeviceClock  # CUDA events, read off the training thread
    run = traincard_otel.load(tmp_path / "store")
    found = step_anatomy(run)
    assert found is not None
    [rank] = found.ranks
    assert rank.unmeasured == () and rank.seconds["forward"] > 0 and rank.seconds["backward"] > 0
    assert rank.seconds["optimizer"] > 0 and sum(rank.shares.values()) == pytest.approx(1)


def test_a_capture_records_the_devices_kernels(cuda: Any, tmp_path: Path) -> None:
    _loop(cuda, tmp_path / "store", 30, ask_at=5)
    [capture] = traincard_otel.load(tmp_path / "store").profiles
    summary = capture["ranks"][0]
    b = summary["breakdown"]
    assert b["device"] and set(b["seconds"]) == {"computation", "communication", "memory", "idle"}
    assert b["seconds"]["computation"] > 0 and sum(b["shares"].values()) == pytest.approx(1)
    device_ops = summary["operators"]["device"]
    assert device_ops and device_ops[0]["self_device_ms"] > 0


def test_an_oom_saves_the_snapshot_and_the_verdict_names_the_allocations(cuda: Any, tmp_path: Path) -> None:
    script = tmp_path / "oom.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            import traincard_otel

            reporter = traincard_otel.configure(memory_history=True)
            held = []
            for step in range(1, 100000):
                held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))  # 1 GiB a step
                reporter.step_end(step, duration_s=0.01)
            """
        )
    )
    store = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=subprocess_env(TRAINCARD_STORE=str(store), TRAINCARD_SYSTEM="false"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode != 0 and "OutOfMemoryError" in proc.stderr
    assert list((store / "memory").glob("a0-r0-*.pickle"))
    verdict = traincard_otel.load(store).failure["verdict"]
    assert verdict["kind"] == "cuda_oom"
    memory = verdict["memory"]
    assert memory["largest"][0]["size"] >= 1 << 30 and memory["peak"] >= memory["allocated"] > 0
    assert memory["largest"][0]["where"].startswith(f"{script}:")
    assert any(line.startswith("live 1 GiB allocated at") for line in verdict["evidence"])
