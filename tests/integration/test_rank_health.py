"""Real multi-rank jobs where one rank is killed, or hangs: rank 0 names it, the card says degraded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._read.payload import build_payload

from tests.support.helpers import REPO, subprocess_env

SCRIPT = REPO / "tests" / "integration" / "scripts" / "rank_health.py"


def _env(store: Path, mode: str, **extra: str) -> dict[str, str]:
    return subprocess_env(
        TRAINCARD_DIR=str(store),
        TRAINCARD_SYSTEM="false",
        TRAINCARD_RANK_TIMEOUT="2",
        TRAINCARD_FLUSH_INTERVAL="0.5",
        RANK_HEALTH_MODE=mode,
        **extra,
    )


def _lost_events(store: Path) -> list[dict]:
    run = traincard_otel.load(store)
    return [e for e in run.events if e["name"] == "traincard.rank.lost"]


@pytest.mark.slow
def test_killed_rank_is_named_by_rank_zero_and_the_card(tmp_path: Path) -> None:
    store = tmp_path / "store"
    procs = []
    # Rank 2 dies 1 s in; ranks 0 and 1 run 7.5 s, which leaves rank 0 (which names it about 3 s
    # after its last heartbeat: the 2 s rank timeout, a 1 s check) seconds to spare.
    for rank in range(3):
        env = _env(
            store, "kill", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="3", RANK_HEALTH_STEPS="150"
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPT)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        p.wait(120)
    assert procs[2].returncode == -signal.SIGKILL
    assert procs[0].returncode == 0 and procs[1].returncode == 0
    lost = _lost_events(store)
    assert [e["attributes"]["traincard.lost_rank"] for e in lost] == [2]
    assert lost[0]["attributes"]["traincard.step"] == 20 and lost[0]["rank"] == 0
    run = traincard_otel.load(store)
    assert sorted(run.step_times) == [0, 1, 2] and run.step_times[2].steps[-1] == 20
    banner = next(b for b in build_payload(run)["banners"] if b["kind"] == "degraded")
    assert "rank 2" in banner["text"] and "step 20" in banner["text"]
    assert "rank 1 " not in banner["text"]  # a rank that finished normally is not dead


@pytest.mark.slow
def test_hung_rank_under_torchrun_is_named(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed next to this interpreter")
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [torchrun, "--nproc_per_node=3", "--max-restarts=0", "--monitor-interval=1", str(SCRIPT)],
        env=_env(store, "hang", RANK_HEALTH_STEPS="200"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        lost: list[dict] = []
        while time.monotonic() < deadline and not lost:
            time.sleep(1)
            runs = [d for d in store.iterdir()] if store.exists() else []
            for d in runs:
                lost = _lost_events(d)
                if lost:
                    break
        assert lost, "rank 0 never declared the hung rank lost"
        assert lost[0]["attributes"]["traincard.lost_rank"] == 2
        run_dir = next(d for d in store.iterdir())
        run = traincard_otel.load(run_dir)
        assert run.status["ranks"][2]["status"] == "running"  # alive, but its heartbeat stopped
        banner = next(b for b in build_payload(run)["banners"] if b["kind"] == "degraded")
        assert "rank 2" in banner["text"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
