"""Real `torchrun --nproc_per_node=2` (gloo, CPU): per-rank step times, rank-0 metrics, rank resources."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO, subprocess_env


@pytest.mark.slow
def test_two_ranks_under_torchrun(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed next to this interpreter")
    store = tmp_path / "store"
    proc = subprocess.run(
        [torchrun, "--nproc_per_node=2", "--max-restarts=0", str(REPO / "examples" / "ddp_raw_loop.py")],
        env=subprocess_env(TRAINCARD_DIR=str(store), TRAINCARD_SYSTEM_INTERVAL="0.5"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = next(store.iterdir())  # torchrun's run id names the directory shared by the ranks
    run = traincard_otel.load(run_dir)
    assert sorted(run.step_times) == [0, 1]
    assert run.step_times[0].steps == run.step_times[1].steps == list(range(1, 41))
    assert set(run.metrics["loss"].ranks) == {0}  # only rank 0 reports training metrics
    states = {s["rank"]: s for s in run.states}
    assert set(states) == {0, 1} and states[1]["local_rank"] == 1 and states[0]["world_size"] == 2
    assert all(s["status"] == "finished" for s in states.values())
    # One system sampler per node: only local rank 0 sampled it.
    assert {r for s in run.system.values() if s.name.startswith("system.") for r in s.ranks} == {0}
