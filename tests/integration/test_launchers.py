"""Ranks as people launch them, outside Metaflow: plain ``python -m torch.distributed.run``,
SLURM's variables (set on plain processes, as ``srun`` sets them), ``accelerate launch``, an HF
Trainer under torchrun. Real processes on CPU with gloo; what ``load()`` and the card say.

The killed-rank runs use the product's defaults (2 s flush interval): the rank SIGKILLed at step
50 leaves no word, its state says "running" at whatever step its last flush held, and the rank
that outlives it is stopped by the launcher or by gloo. The reader must still name it first.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._read.payload import build_payload
from traincard_otel._read.payload.gang import gang_section

from tests.support.helpers import REPO, subprocess_env

pytest.importorskip("torch")

SCRIPTS = REPO / "tests" / "integration" / "scripts"
RANK_SCRIPT = SCRIPTS / "launched_rank.py"
# Rank 1 kills itself as this step starts, 2.5 s in (0.1 s steps); the store is flushed every
# 0.5 s, so several of its step ends are on record by then.
KILL = {"LAUNCH_KILL_RANK": "1", "LAUNCH_KILL_AT": "25", "TRAINCARD_FLUSH_INTERVAL": "0.5"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(script: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--max-restarts=0",
            str(script),
        ],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _only_run(store: Path) -> Path:
    runs = list(store.iterdir())
    assert len(runs) == 1, runs  # the ranks of one launch share one run folder
    return runs[0]


def _assert_rank_1_killed_first(run: Any) -> dict[str, Any]:
    section = gang_section(analyse(run).gang)
    assert section is not None and section["world_size"] == 2
    first = section["first_failure"]
    assert first is not None
    assert (first["rank"], first["signal"], first["exit_code"]) == (1, 9, -9), first
    assert first["how"] == "killed (signal 9, SIGKILL)"  # no memory evidence: no OOM claim
    # Its last step is its own last record (rank 0 reports the metrics; rank 1 only step ends).
    assert first["step"] == run.step_times[1].steps[-1] and 0 < first["step"] < int(KILL["LAUNCH_KILL_AT"])
    assert any("was at step" in e for e in first["evidence"])
    [after] = first["consequences"]
    assert after["rank"] == 0 and after["time"] > first["heartbeat_at"]
    # Rank 1 is no longer shown running: the run is over and it left without a word.
    statuses = {r["rank"]: r["status"] for r in section["ranks"]}
    assert statuses[1] == "vanished" and statuses[0] in ("terminated", "failed")
    assert {s["rank"]: s["status"] for s in run.states}[1] == "vanished"
    # load().failure and the card's banner name the cause, not what rank 0 met after it.
    assert run.failure is not None and run.failure["rank"] == 1 and "SIGKILL" in run.failure["message"]
    failed = [b["text"] for b in build_payload(run)["banners"] if b["kind"] == "failed"]
    assert failed and "rank 1" in failed[0] and "SIGKILL" in failed[0], failed
    return first


@pytest.mark.slow
def test_plain_torchrun_names_the_rank_killed_without_a_word(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = subprocess_env(TRAINCARD_DIR=str(store), **KILL)
    proc = _torchrun(RANK_SCRIPT, env, tmp_path)
    assert proc.returncode != 0
    # torchrun itself says so on its console, which nothing here reads: the store must know.
    assert "exitcode  : -9" in proc.stderr, proc.stderr[-3000:]
    run = traincard_otel.load(_only_run(store))
    assert {s["rank"]: s["world_size"] for s in run.states} == {0: 2, 1: 2}
    assert sorted(run.step_times) == [0, 1] and set(run.metrics["loss"].ranks) == {0}
    first = _assert_rank_1_killed_first(run)
    assert any("rank 0 on its node read its exit status" in e for e in first["evidence"])


def _slurm_env(store: Path, rank: int, port: int, **extra: str) -> dict[str, str]:
    """What ``srun --ntasks=2`` sets for task ``rank`` on one node (no torch variables)."""
    return subprocess_env(
        TRAINCARD_DIR=str(store),
        SLURM_JOB_ID="4242",
        SLURM_STEP_ID="0",
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(rank),
        SLURM_NODEID="0",
        SLURM_NTASKS="2",
        SLURM_STEP_NUM_TASKS="2",
        SLURM_STEP_TASKS_PER_NODE="2",
        SLURM_TASKS_PER_NODE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        **extra,
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["healthy", "kill"])
def test_slurm_tasks_get_their_rank_and_world_size(tmp_path: Path, mode: str) -> None:
    store, port = tmp_path / "store", _free_port()
    extra = KILL if mode == "kill" else {"LAUNCH_STEPS": "20"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(RANK_SCRIPT)],
            env=_slurm_env(store, rank, port, **extra),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    run_dir = _only_run(store)
    assert run_dir.name == "slurm-4242-0"
    run = traincard_otel.load(run_dir)
    states = {s["rank"]: s for s in run.states}
    assert set(states) == {0, 1}
    assert [(states[r]["local_rank"], states[r]["node_rank"], states[r]["world_size"]) for r in (0, 1)] == [
        (0, 0, 2),
        (1, 0, 2),
    ]
    assert sorted(run.step_times) == [0, 1]
    if mode == "healthy":
        assert [p.returncode for p in procs] == [0, 0], outs
        assert run.step_times[1].steps == list(range(1, 21))
        assert all(s["status"] == "finished" for s in states.values()) and run.failure is None
    else:
        assert procs[1].returncode == -signal.SIGKILL
        _assert_rank_1_killed_first(run)


@pytest.mark.slow
def test_accelerate_launch_runs_two_ranks(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    if accelerate is None:
        pytest.skip("the accelerate CLI is not installed next to this interpreter")
    store = tmp_path / "store"
    proc = subprocess.run(
        # --multi_gpu is accelerate's torch-elastic launcher; without a GPU its ranks run on gloo
        [
            accelerate,
            "launch",
            "--multi_gpu",
            "--num_processes=2",
            "--num_machines=1",
            "--mixed_precision=no",
            "--dynamo_backend=no",
            f"--main_process_port={_free_port()}",
            str(SCRIPTS / "accelerate_rank.py"),
        ],
        env=subprocess_env(TRAINCARD_DIR=str(store)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = traincard_otel.load(_only_run(store))
    states = {s["rank"]: s for s in run.states}
    assert {r: (s["world_size"], s["local_rank"], s["status"]) for r, s in states.items()} == {
        0: (2, 0, "finished"),
        1: (2, 1, "finished"),
    }
    assert run.step_times[0].steps == run.step_times[1].steps == list(range(1, 21))
    assert set(run.metrics["loss"].ranks) == {0}  # accelerator.log: the main process only


@pytest.mark.slow
def test_hf_trainer_under_plain_torchrun_times_both_ranks(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    store = tmp_path / "store"
    env = subprocess_env(TRAINCARD_DIR=str(store), HF_OUTPUT_DIR=str(tmp_path / "out"))
    proc = _torchrun(SCRIPTS / "hf_rank.py", env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = traincard_otel.load(_only_run(store))
    states = {s["rank"]: s for s in run.states}
    assert {r: s["world_size"] for r, s in states.items()} == {0: 2, 1: 2}
    assert states[0]["progress"]["world_size"] == 2
    assert run.step_times[0].steps == run.step_times[1].steps == list(range(1, 13))
    assert all(v > 0 for r in (0, 1) for v in run.step_times[r].values)
    assert set(run.metrics["loss"].ranks) == {0}  # the Trainer logs on the main process only
    section = gang_section(analyse(run).gang)
    assert section is not None and section["world_size"] == 2 and section["first_failure"] is None
    assert all(r["steps_timed"] == 12 and r["status"] == "finished" for r in section["ranks"])
