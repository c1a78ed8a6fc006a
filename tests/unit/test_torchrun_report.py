"""torchrun's own failure report, read from a node's captured console, as the agent's record."""

from __future__ import annotations

import time
from typing import Any

import pytest

from traincard_otel._analysis.gang.attribution import analyze
from traincard_otel._analysis.gang.torchrun_report import agent_records, parse_failures
from traincard_otel._data.rundata import RunData

pytest.importorskip("torch")


def _report() -> str:
    """The text torch's elastic agent raises (and torchrun prints) when two workers ended."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    killed = ProcessFailure(local_rank=1, pid=4322, exitcode=-9, error_file="/nonexistent/error.json")
    stopped = ProcessFailure(local_rank=0, pid=4321, exitcode=-15, error_file="/nonexistent/error.json")
    return str(ChildFailedError("train.py", {3: killed, 2: stopped}))


def _logs(text: str, node: int = 0, attempt: int = 0, t0: float = 100.0) -> list[dict[str, Any]]:
    return [
        {"time": t0 + i * 1e-3, "message": line, "attempt": attempt, "rank": 0, "node_index": node}
        for i, line in enumerate(text.splitlines())
        if line.strip()
    ]


def test_a_real_report_gives_each_failed_rank_with_its_signal_and_the_root_cause() -> None:
    lines = _report().splitlines()
    lines.insert(8, "step 14 loss 0.31")  # another process's output, interleaved
    failures = {f["rank"]: f for f in parse_failures(lines)}
    assert set(failures) == {2, 3}
    killed = failures[3]
    assert (killed["local_rank"], killed["pid"], killed["exitcode"], killed["signal"]) == (
        1,
        4322,
        -9,
        "SIGKILL",
    )
    assert killed["root_cause"] and not failures[2]["root_cause"] and failures[2]["signal"] == "SIGTERM"
    assert killed["message"] == "Signal 9 (SIGKILL) received by PID 4322"
    assert killed["time"] == pytest.approx(time.time(), abs=60) and killed["host"]


def test_an_entry_cut_short_or_text_that_only_looks_like_one_is_not_guessed() -> None:
    text = _report()
    cut = text[: text.index("  exitcode  : -9")]  # the root cause lost its exit code
    assert [f["rank"] for f in parse_failures(cut.splitlines())] == [2]
    assert parse_failures(["rank      : 3 (local_rank: 1)", "exitcode  : -9 (pid: 1)"]) == []


def test_agent_records_per_attempt_name_each_rank_once() -> None:
    text = _report()
    logs = (
        _logs(text, node=1, attempt=0) + _logs(text, node=1, attempt=0, t0=200.0) + _logs(text, 1, 1, 300.0)
    )
    records = agent_records(logs, 1)
    assert [r["attempt"] for r in records] == [0, 1]
    assert sorted(f["rank"] for f in records[0]["failures"]) == [2, 3]
    assert records[0]["node_rank"] == 1 and records[0]["ended_at"] == pytest.approx(200.0, abs=1)


def test_under_plain_torchrun_the_first_failure_comes_from_the_report() -> None:
    now = time.time()
    data = RunData(source="run")
    for rank, local, status, beat in ((2, 0, "terminated", now - 5), (3, 1, "running", now - 6)):
        state = {"rank": rank, "local_rank": local, "node_rank": 0, "status": status, "step": 14}
        state.update(attempt=0, pid=4319 + rank, host="n0", heartbeat_at=beat, updated_at=beat)
        data.states.append({**state, "started_at": now - 60, "terminated_by": "SIGTERM"})
    data.logs = _logs(_report())
    section = analyze(data, now)
    assert section is not None
    first = section["first_failure"]
    assert (first["rank"], first["signal"], first["exit_code"], first["pid"]) == (3, 9, -9, 4322)
    assert first["how"] == "killed (signal 9, SIGKILL)"
    assert any("torchrun's failure report" in e for e in first["evidence"])
    assert [c["rank"] for c in first["consequences"]] == [2]
    assert section["hung"] == []  # its end is known: not a hung rank
