"""Ranks as launchers start them: who they are (torch's, SLURM's, Open MPI's variables), the
store they share, and how the reader ends a rank that left no terminal record.

The reader's rules are checked on stores written by the real StoreWriter, as the ranks of one
plain ``torchrun`` launch write them (one folder, no Metaflow, no agent record).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._identity import launch_id, launched_rank
from traincard_otel._read.payload.gang import gang_section
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.where import default_local_dir
from traincard_otel._write.store.writer import StoreWriter
from traincard_otel._write.telemetry.siblings import describe, exit_status

from tests.support.helpers import subprocess_env

SRUN = {
    "SLURM_JOB_ID": "77",
    "SLURM_STEP_ID": "3",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "2",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_STEP_TASKS_PER_NODE": "2(x3),2",
}


def test_torch_variables_name_the_rank() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    rank = launched_rank(env)
    assert rank is not None
    assert (rank.rank, rank.local_rank, rank.world_size, rank.node_rank, rank.local_world_size) == (
        3,
        1,
        4,
        1,
        2,
    )


def test_srun_variables_name_the_rank_when_torch_says_nothing() -> None:
    rank = launched_rank(SRUN)
    assert rank is not None
    assert (rank.rank, rank.local_rank, rank.world_size, rank.node_rank, rank.local_world_size) == (
        5,
        1,
        8,
        2,
        2,
    )
    assert launch_id(SRUN) == "slurm-77-3"
    assert default_local_dir({**SRUN, "TRAINCARD_DIR": "/data"}) == os.path.join("/data", "slurm-77-3")


def test_torchrun_inside_an_srun_task_is_read_as_torchrun() -> None:
    env = {**SRUN, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "abc"}
    rank = launched_rank(env)
    assert rank is not None and (rank.rank, rank.world_size, rank.local_rank) == (0, 2, 0)
    assert launch_id(env) == "torchrun-abc"


def test_a_batch_script_is_not_a_rank_of_its_job() -> None:
    # sbatch runs the script with SLURM_PROCID=0 and the job's task count, but no job step
    batch = {k: v for k, v in SRUN.items() if k not in ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS")}
    assert launched_rank(batch) is None and launch_id(batch) is None


def test_open_mpi_variables_name_the_rank() -> None:
    env = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
    rank = launched_rank(env)
    assert rank is not None and (rank.rank, rank.world_size, rank.local_rank) == (2, 4, 0)


def test_one_node_without_a_run_id_shares_the_launchers_name() -> None:
    # accelerate launch and torchrun's static rendezvous set TORCHELASTIC_RUN_ID=none
    env = {"TORCHELASTIC_RUN_ID": "none", "GROUP_WORLD_SIZE": "1", "RANK": "1"}
    assert launch_id(env, parent_pid=4321) == f"torchrun-{socket.gethostname()}-4321"
    assert launch_id({**env, "GROUP_WORLD_SIZE": "2"}) is None  # nodes do not share a parent


_RUN_NAME = """
import json, multiprocessing, os, sys
from traincard_otel._write.store.where import default_local_dir

def name(out):
    out.put(os.path.basename(default_local_dir()))

if __name__ == "__main__":
    me = {"pid": os.getpid(), "ppid": os.getppid(), "name": os.path.basename(default_local_dir())}
    print(json.dumps(me))
    if "--spawn" in sys.argv:  # torch.multiprocessing.spawn's workers are multiprocessing's
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        workers = [ctx.Process(target=name, args=(q,)) for _ in range(2)]
        for w in workers:
            w.start()
        print(json.dumps([q.get(timeout=60) for _ in workers]))
        for w in workers:
            w.join()
"""


def test_each_launch_of_a_script_is_a_run_of_its_own(tmp_path: Path) -> None:
    import json

    script = tmp_path / "name.py"
    script.write_text(_RUN_NAME)

    def launch(*args: str, **env: str) -> list[Any]:
        launcher_vars = ("TORCHELASTIC", "SLURM_", "RANK", "WORLD_SIZE", "LOCAL_RANK")
        base = {k: v for k, v in subprocess_env().items() if not k.startswith(launcher_vars)}
        cmd = [sys.executable, str(script), *args]
        out = subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return [json.loads(line) for line in out.stdout.splitlines()]

    (first,), (second,) = launch(), launch()
    assert first["name"].startswith("run-") and first["name"].endswith(f"-{first['pid']}")
    assert second["name"] != first["name"]  # a re-run is not a restart of the last run
    me, workers = launch("--spawn")
    assert workers == [me["name"], me["name"]]  # spawned workers: their parent's run
    (rank,) = launch(RANK="1", WORLD_SIZE="2")  # a launcher of its own: the launcher's run
    assert rank["name"].endswith(f"-{rank['ppid']}")
    (named,) = launch(TRAINCARD_RUN_NAME="resume-me")
    assert named["name"] == "resume-me"
    (torchrun,) = launch(TORCHELASTIC_RUN_ID="abc", RANK="0", WORLD_SIZE="2")
    assert torchrun["name"] == "torchrun-abc"


def test_a_wait_status_reads_as_torch_reports_it() -> None:
    assert describe(9) == (-9, "SIGKILL")
    assert describe(3 << 8) == (3, None)
    assert describe(None) == (None, None)


def test_the_exit_status_of_an_ended_process_is_read_before_it_is_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert exit_status(child.pid) is None  # alive
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        status = None
        while status is None and time.monotonic() < deadline:
            status = exit_status(child.pid)
            time.sleep(0.01)
        assert describe(status) == (-9, "SIGKILL")
    finally:
        child.kill()
        child.wait()
    assert exit_status(child.pid) is None  # reaped: nothing left to read


# -- the reader: a rank that left no terminal record ---------------------------------------------
def _run(
    root: Path, states: dict[int, dict[str, Any]], records: dict[int, list[dict[str, Any]]] | None = None
) -> Path:
    """Two ranks of one launch in one folder, as plain torchrun's ranks write them."""
    for rank, state in states.items():
        writer = StoreWriter(LocalBackend(root), attempt=0, rank=rank)
        writer.add_many((records or {}).get(rank, []))
        writer.set_state(
            {
                "status": "running",
                "started_at": time.time() - 100,
                "host": "host0",
                "pid": 100 + rank,
                "local_rank": rank,
                "node_rank": 0,
                "world_size": 2,
                "flush_interval_s": 2.0,
                **state,
            }
        )
        writer.close(5.0)
    return root


def test_a_rank_silent_since_before_the_other_ended_is_the_first_failure(tmp_path: Path) -> None:
    now = time.time()
    run = traincard_otel.load(
        _run(
            tmp_path,
            {
                0: {"status": "terminated", "terminated_by": "SIGTERM", "step": 50, "updated_at": now - 29},
                1: {"step": 44, "heartbeat_at": now - 30.5, "updated_at": now - 30},
            },
        )
    )
    section = gang_section(analyse(run, now=now).gang)
    assert section is not None
    first = section["first_failure"]
    assert (first["rank"], first["step"], first["how"]) == (1, 44, "vanished without a terminal record")
    assert "no state written for 30 s" in first["evidence"][0]
    assert [(c["rank"], c["how"]) for c in first["consequences"]] == [(0, "terminated by SIGTERM")]
    assert {r["rank"]: r["status"] for r in section["ranks"]} == {0: "terminated", 1: "vanished"}
    assert {s["rank"]: s["status"] for s in run.states} == {0: "terminated", 1: "vanished"}
    assert run.failure is not None and run.failure["rank"] == 1


def test_a_rank_that_may_still_write_is_not_ended_yet(tmp_path: Path) -> None:
    now = time.time()
    # rank 0 raised a moment ago; rank 1 wrote 1.5 s ago and writes every 2 s: it may be alive
    run = traincard_otel.load(
        _run(
            tmp_path,
            {
                0: {"status": "failed", "step": 50, "updated_at": now - 0.5},
                1: {"step": 50, "heartbeat_at": now - 1.5, "updated_at": now - 1.5},
            },
        )
    )
    section = gang_section(analyse(run, now=now).gang)
    assert section is not None and section["first_failure"]["rank"] == 0
    assert {r["rank"]: r["status"] for r in section["ranks"]}[1] == "running"


def test_a_rank_still_writing_after_the_other_ended_is_not_vanished(tmp_path: Path) -> None:
    now = time.time()
    # blocked in a collective after rank 0 terminated: its flush thread still writes its state
    states = {
        0: {"status": "terminated", "terminated_by": "SIGTERM", "step": 50, "updated_at": now - 30},
        1: {"step": 50, "heartbeat_at": now - 31, "updated_at": now - 10},
    }
    section = gang_section(analyse(traincard_otel.load(_run(tmp_path, states)), now=now).gang)
    assert section is not None and section["first_failure"]["rank"] == 0
    assert section["first_failure"]["consequences"] == []


def test_a_sibling_that_saw_the_rank_end_gives_its_signal(tmp_path: Path) -> None:
    now = time.time()
    seen = {"rank": 1, "local_rank": 1, "pid": 101, "time": now - 2, "exitcode": -9, "signal": "SIGKILL"}
    states = {
        0: {
            "status": "failed",
            "step": 49,
            "updated_at": now - 1.5,
            "failure": {"type": "RuntimeError", "message": "Connection closed by peer", "time": now - 1.9},
            "ended_siblings": [{**seen, "seen_at_step": 49}],
        },
        1: {"step": 44, "heartbeat_at": now - 2.5, "updated_at": now - 2.4},
    }
    run = traincard_otel.load(_run(tmp_path, states))  # read at once: no waiting for silence
    first = run.gang["summary"]["first_failure"]
    assert (first["rank"], first["signal"], first["exit_code"], first["step"]) == (1, 9, -9, 44)
    assert first["evidence"] == [
        "rank 0 on its node read its exit status as it ended: exit code -9 for pid 101",
        "rank 0 was at step 49 then",
    ]
    assert [c["rank"] for c in first["consequences"]] == [0]
    assert run.failure is not None and "SIGKILL" in run.failure["message"]


@pytest.mark.parametrize("code", [None, 0])
def test_a_sibling_that_saw_the_rank_end_without_a_failing_status_still_ends_it(
    tmp_path: Path, code: int | None
) -> None:
    now = time.time()
    seen = {"rank": 1, "local_rank": 1, "pid": 101, "time": now - 2, "exitcode": code, "signal": None}
    states = {
        0: {
            "status": "terminated",
            "terminated_by": "SIGTERM",
            "updated_at": now - 1.5,
            "ended_siblings": [seen],
        },
        1: {"step": 44, "heartbeat_at": now - 2.5, "updated_at": now - 2.4},
    }
    first = traincard_otel.load(_run(tmp_path, states)).gang["summary"]["first_failure"]
    assert first["rank"] == 1 and first["how"] == "vanished without a terminal record"
    assert first["evidence"][0].startswith("rank 0 saw its process (pid 101) end")


def test_a_hung_ranks_failure_shows_the_last_readings_its_node_sampler_took(tmp_path: Path) -> None:
    now = time.time()
    # rank 1 hangs in a data fetch, rank 0 waits in all_reduce; only rank 0 samples the node
    # (local rank 0), and it wrote its readings as system series, not into its state
    readings = [
        {"k": "x", "t": now - 40 + i, "n": name, "u": unit, "v": value * (i + 1), "a": attrs}
        for i in range(3)
        for name, unit, value, attrs in (
            ("system.cpu.utilization", "1", 0.2, {}),
            ("system.memory.utilization", "1", 0.25, {"system.memory.state": "used"}),
            ("hw.gpu.utilization", "1", 0.3, {"hw.id": "gpu1", "hw.name": "H100"}),
        )
    ]
    states = {
        0: {"step": 50, "heartbeat_at": now - 30, "updated_at": now - 1, "rank_timeout_s": 10},
        1: {"step": 49, "heartbeat_at": now - 31, "updated_at": now - 1, "rank_timeout_s": 10},
    }
    run = traincard_otel.load(_run(tmp_path, states, {0: readings}))
    section = gang_section(analyse(run, now=now).gang)
    assert section is not None and section["first_failure"]["rank"] == 1
    assert run.failure is not None and run.failure["rank"] == 1
    assert run.failure["last_system"] == pytest.approx(
        {
            "system.cpu.utilization": 0.6,
            "system.memory.utilization{system.memory.state=used}": 0.75,
            "hw.gpu.utilization[gpu1]": 0.9,
        }
    )
    assert section["nodes"][0]["system"]["cpu_utilization"] == pytest.approx(0.6)
    # where the sampling rank wrote its readings into its state too, those are the ones shown
    states[0]["last_system"] = {"system.cpu.utilization": 0.5}
    run = traincard_otel.load(_run(tmp_path / "state", states, {0: readings}))
    assert run.failure is not None and run.failure["last_system"] == {"system.cpu.utilization": 0.5}
