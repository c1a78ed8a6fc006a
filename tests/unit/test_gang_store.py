"""A gang's stores (written by the real StoreWriter, laid out as @parallel nodes write them) read
back as one run: nodes found through the control task, launcher states kept apart, the first
failure ordered by when ranks ended, SIGKILL called the OOM killer only with memory evidence."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._read.payload.gang import gang_section
from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.gang_markers import write_markers
from traincard_otel._write.store.writer import StoreWriter

NOW = time.time()


def _rank(folder: Path, rank: int, node: int, state: dict[str, Any], durations: list[float]) -> None:
    writer = StoreWriter(LocalBackend(folder), attempt=0, rank=rank)
    writer.set_state(
        {
            "status": "running",
            "started_at": NOW - 100,
            "updated_at": NOW - 50,
            "heartbeat_at": NOW - 50,
            "host": f"host{node}",
            "pid": 100 + rank,
            "local_rank": rank % 2,
            "node_rank": node,
            "world_size": 4,
            "rank_timeout_s": 5.0,
            **state,
        }
    )
    if not durations:
        writer.close(5.0)
        return
    steps = list(range(1, len(durations) + 1))
    times = [NOW - 100 + s for s in steps]
    n = len(steps)
    runs = [segment.step_run(steps, times, durations, [0.01] * n, [0] * n, [0] * n)]
    if rank == 0:
        runs.append(segment.metric_run(None, ("loss",), steps, times, [1.0 / s for s in steps]))
    writer.add_many(runs)
    writer.flush_now()
    writer.close(5.0)


def _gang(
    root: Path,
    states: dict[int, dict[str, Any]],
    agent_failures: list[dict[str, Any]],
    launcher_system: dict[str, float] | None = None,
) -> Path:
    step_dir = root / "Flow" / "1" / "train"
    control = LocalBackend(step_dir / "5" / "traincard")
    for node in (0, 1):
        task = "5" if node == 0 else "5_node_1"
        store = step_dir / task / "traincard"
        info = {
            "node_index": node,
            "num_nodes": 2,
            "control_task_id": "5",
            "task_id": task,
            "pathspec": f"Flow/1/train/{task}",
            "host": f"host{node}",
            "launcher_pid": 1,
        }
        write_markers(LocalBackend(store), control, info)
        # The node's step process: its state says how the node looks, it is no training rank.
        launcher = {
            "status": "running",
            "host": f"host{node}",
            "pid": 1,
            "last_system": launcher_system or {},
        }
        _rank(store, node, node, launcher, [])
        for rank in (2 * node, 2 * node + 1):
            _rank(store, rank, node, states.get(rank, {}), [0.1 if rank != 2 else 0.3] * 10)
        agent = {
            "node_rank": node,
            "attempt": 0,
            "host": f"host{node}",
            "started_at": NOW - 120,
            "ended_at": NOW - 40,
            "exit_code": 1,
            "failures": [f for f in agent_failures if f["rank"] // 2 == node],
            "exit_barrier_timeout_s": 300.0,
        }
        LocalBackend(store).write(f"elastic/node-{node}-9.json", json.dumps(agent).encode())
    return step_dir / "5_node_1"


def _killed(rank: int) -> dict[str, Any]:
    return {
        "rank": rank,
        "local_rank": rank % 2,
        "pid": 100 + rank,
        "exitcode": -9,
        "signal": "SIGKILL",
        "time": NOW - 45,
        "message": "Signal 9 (SIGKILL) received",
        "traceback": None,
        "error_file": None,
    }


def test_a_gang_reads_as_one_run_from_any_task(tmp_path: Path) -> None:
    states = {r: {"status": "finished"} for r in range(4)}
    run = traincard_otel.load(_gang(tmp_path, states, []))
    assert run.source == "Flow/1/train"
    assert sorted(run.step_times) == [0, 1, 2, 3]
    assert sorted((s["rank"], s["node_index"]) for s in run.states) == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert [n["ranks"] for n in run.gang["nodes"]] == [[0, 1], [2, 3]]
    summary = run.gang["summary"]
    assert summary["world_size"] == 4 and summary["first_failure"] is None
    slow = summary["stragglers"]["slowest"]
    assert (slow["rank"], slow["node"]) == (2, 1) and abs(slow["ratio"] - 3.0) < 1e-9
    assert all(abs(r["data_wait_share"] - 0.1) < 1e-9 for r in summary["ranks"] if r["rank"] != 2)


def test_the_killed_rank_is_the_cause_and_the_others_consequences(tmp_path: Path) -> None:
    states = {
        0: {
            "status": "failed",
            "step": 10,
            "failure": {
                "type": "RuntimeError",
                "message": "Connection closed by peer",
                "traceback": "tb",
                "time": NOW - 44,
            },
        },
        1: {
            "status": "failed",
            "step": 10,
            "failure": {"type": "RuntimeError", "message": "peer", "time": NOW - 43},
        },
        2: {"status": "terminated", "terminated_by": "SIGTERM", "step": 10, "updated_at": NOW - 44.5},
        3: {"status": "running", "step": 9, "heartbeat_at": NOW - 46, "updated_at": NOW - 46},
    }
    run = traincard_otel.load(_gang(tmp_path, states, [_killed(3)]))
    first = run.gang["summary"]["first_failure"]
    assert (first["rank"], first["node"], first["host"], first["pid"], first["step"]) == (
        3,
        1,
        "host1",
        103,
        9,
    )
    assert first["how"] == "killed (signal 9, SIGKILL)" and first["exit_code"] == -9
    assert [c["rank"] for c in first["consequences"]] == [2, 0, 1]
    assert first["last_metrics"]["loss"] == {"step": 10, "value": 0.1}  # the loss chart's last point
    # load().failure is the cause, not the RuntimeError a surviving rank raised afterwards.
    assert run.failure is not None and run.failure["rank"] == 3 and "signal 9" in run.failure["message"]
    assert "OOM" not in run.failure["message"]


def test_sigkill_is_the_oom_killer_only_with_memory_evidence(tmp_path: Path) -> None:
    states: dict[int, dict[str, Any]] = {r: {"status": "finished"} for r in range(3)}
    states[3] = {"status": "running", "step": 9, "heartbeat_at": NOW - 46}
    memory = {"system.memory.utilization{system.memory.state=used}": 0.97}
    run = traincard_otel.load(_gang(tmp_path, states, [_killed(3)], launcher_system=memory))
    first = run.gang["summary"]["first_failure"]
    assert first["how"] == "killed (signal 9), likely the OOM killer"
    assert "host memory 97% used in the last sample" in first["evidence"]
    assert run.failure is not None and run.failure["verdict"]["kind"] == "host_oom"


def test_a_hung_rank_is_named_and_the_others_wait_for_it(tmp_path: Path) -> None:
    states = {
        0: {"step": 10, "heartbeat_at": NOW - 20},
        1: {"step": 10, "heartbeat_at": NOW - 20},
        2: {"step": 10, "heartbeat_at": NOW - 20},
        3: {"step": 9, "heartbeat_at": NOW - 21},
    }
    data = traincard_otel.load(_gang(tmp_path, states, []))
    section = gang_section(analyse(data, now=NOW).gang)
    assert section is not None
    assert [h["rank"] for h in section["hung"]] == [3] and [w["rank"] for w in section["waiting"]] == [
        0,
        1,
        2,
    ]
    first = section["first_failure"]
    assert first["rank"] == 3 and first["hung"] and first["step"] == 9
    assert any("Rank 3" in line["text"] or "rank 3 on node 1" in line["text"] for line in section["headline"])


def test_a_node_whose_ranks_finished_says_it_waits_at_the_exit_barrier(tmp_path: Path) -> None:
    states = {
        0: {"status": "finished", "step": 10},
        1: {"status": "finished", "step": 10},
        2: {"step": 10, "heartbeat_at": NOW - 1},
        3: {"step": 10, "heartbeat_at": NOW - 1},
    }
    worker = _gang(tmp_path, states, [])
    # node 0's agent is still running (no end recorded): it waits at torch elastic's exit barrier
    control = LocalBackend(worker.parent / "5" / "traincard")
    name = next(n for n in control.list() if n.startswith("elastic/"))
    agent = json.loads(control.read_many([name])[name])
    control.write(name, json.dumps({**agent, "ended_at": None, "exit_code": None}).encode())
    section = gang_section(analyse(traincard_otel.load(worker), now=NOW).gang)
    assert section is not None and section["first_failure"] is None
    assert section["waits"] == [
        "node 0: its ranks finished; torch elastic's agent waits at its exit barrier (up to 300 s) for node 1"
    ]
