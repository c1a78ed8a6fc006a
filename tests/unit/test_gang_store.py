"""A gang's stores (written by the real StoreWriter, laid out as @parallel nodes write them) read
back as one run: nodes found through the control task, launcher states kept apart, the first
failure ordered by when ranks ended, SIGKILL called the OOM killer only with memory evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._read.payload.gang import gang_section
from traincard_otel._store.backends import LocalBackend

from tests.support.runs import NOW, gang_store


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
    run = traincard_otel.load(gang_store(tmp_path, states, []))
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
    run = traincard_otel.load(gang_store(tmp_path, states, [_killed(3)]))
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
    run = traincard_otel.load(gang_store(tmp_path, states, [_killed(3)], launcher_system=memory))
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
    data = traincard_otel.load(gang_store(tmp_path, states, []))
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
    worker = gang_store(tmp_path, states, [])
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
