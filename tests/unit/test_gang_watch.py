"""A gang's failed and hung ranks are found by its control node's watchdog, from the rank states
every node's ranks write: a real pipeline set up as the control task's step process reads the two
nodes' stores through the gang's markers, records the events in its own queue (so the guard
rails notify them and OTLP receives them) and reports the gang's gauges."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks._webhooks import Receiver, receiver
from traincard_otel._read.load.reader import read_store
from traincard_otel._schema import Attr, Event, Metric
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.pipeline import Pipeline
from traincard_otel._write.store.gang_markers import write_markers
from traincard_otel._write.store.writer import StoreWriter

from tests.support.otlp_receiver import Received, http_receiver

HOST = os.uname().nodename
NODE_1_LAUNCHER = 999_999_001  # the worker node's step process (another machine's pid)


def _state(store: LocalBackend, rank: int, **fields: Any) -> None:
    writer = StoreWriter(store, attempt=0, rank=rank)
    writer.set_state(
        {
            "status": "running",
            "step": 14,
            "started_at": time.time() - 100,
            "heartbeat_at": time.time(),
            "updated_at": time.time(),
            "rank_timeout_s": 3.0,
            "flush_interval_s": 0.5,
            "world_size": 4,
            "local_rank": rank % 2,
            **fields,
        }
    )
    assert writer.flush_now()


def _gang(root: Path) -> tuple[LocalBackend, LocalBackend]:
    """The control task's store (node 0, this process its step process) and the worker's, with
    the markers each node's step process writes; node 1's step process and ranks 0-2 alive."""
    control, worker = LocalBackend(root / "10" / "traincard"), LocalBackend(root / "10_node_1" / "traincard")
    for store, index, task, host, pid in (
        (control, 0, "10", HOST, os.getpid()),
        (worker, 1, "10_node_1", "n1", NODE_1_LAUNCHER),
    ):
        info = {"node_index": index, "num_nodes": 2, "control_task_id": "10", "task_id": task}
        write_markers(
            store, control, {**info, "pathspec": f"F/1/train/{task}", "host": host, "launcher_pid": pid}
        )
    for rank in (0, 1):
        _state(control, rank, host=HOST, pid=100 + rank)
    _state(worker, 2, host="n1", pid=202)
    _state(worker, 1, host="n1", pid=NODE_1_LAUNCHER, local_rank=0)  # the step process: not a rank
    return control, worker


@pytest.fixture
def control_node(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Received, Receiver]]:
    """The environment @traincard gives the control task's step process, metrics to a receiver."""
    with http_receiver() as (endpoint, got), receiver() as hook:
        for name, value in {
            "TRAINCARD_NODE_INDEX": "0",
            "TRAINCARD_NUM_NODES": "2",
            "TRAINCARD_GANG_CONTROL": "10",
            "TRAINCARD_LAUNCHER_PID": str(os.getpid()),
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_METRIC_EXPORT_INTERVAL": "200",
        }.items():
            monkeypatch.setenv(name, value)
        yield got, hook


def _start(control: LocalBackend, hook: Receiver, notify_on: str) -> Pipeline:
    pipeline = _pipeline.start(
        backend=control,
        system=False,
        capture_console=False,
        rank_timeout_s=3.0,
        notify=hook.url,
        notify_on=notify_on,
    )
    assert pipeline is not None and pipeline.rank.launcher and pipeline.gang_watch is not None
    return pipeline


def _points(got: Received, name: str) -> list[dict[str, Any]]:
    with got.lock:
        found = [m for m in got.metrics if m["name"] == name]
    return [{**p["attributes"], "value": p["value"]} for p in (found[-1]["points"] if found else [])]


def _events(store: LocalBackend, name: str) -> list[dict[str, Any]]:
    return [e for e in read_store(store).events if e["name"] == name]


def test_a_hung_rank_raises_the_event_and_the_gauge_and_is_notified(
    tmp_path: Path, control_node: tuple[Received, Receiver]
) -> None:
    got, hook = control_node
    control, worker = _gang(tmp_path)
    _state(worker, 3, host="n1", pid=203, heartbeat_at=time.time() - 60)  # alive, silent for 60 s
    pipeline = _start(control, hook, notify_on="rank_hung")
    try:
        for _ in range(2):  # (its own thread looks too, every 1.5 s): each rank is said once
            diagnosis = pipeline.gang_watch.check()  # type: ignore[union-attr]
        assert diagnosis is not None and [h["rank"] for h in diagnosis["hung"]] == [3]
        notice = hook.wait_for("rank_hung")
        assert notice["rank"] == 3 and "rank 3 stopped heart-beating" in notice["text"]
        deadline = time.monotonic() + 10
        while not _points(got, Metric.GANG_RANKS_HUNG.name) and time.monotonic() < deadline:
            time.sleep(0.1)
        hung = _points(got, Metric.GANG_RANKS_HUNG.name)
        assert [(p[Attr.RANK], p[Attr.GANG_NODE_INDEX], p[Attr.HOST_NAME], p["value"]) for p in hung] == [
            (3, 1, "n1", 1)
        ]
    finally:
        pipeline.shutdown()
    [event] = _events(control, Event.GANG_RANK_HUNG)
    attrs = event["attributes"]
    assert (attrs[Attr.RANK], attrs[Attr.GANG_NODE_INDEX], attrs[Attr.STEP], attrs[Attr.PROCESS_PID]) == (
        3,
        1,
        14,
        203,
    )
    [first] = _events(control, Event.GANG_FIRST_FAILURE)
    assert first["attributes"][Attr.RANK] == 3 and "hung" in first["attributes"][Attr.GANG_FAILURE_HOW]
    assert hook.kinds() == ["rank_hung"]  # notify_on names only it


def test_a_killed_rank_is_the_first_failure_from_what_its_sibling_saw(
    tmp_path: Path, control_node: tuple[Received, Receiver]
) -> None:
    got, hook = control_node
    control, worker = _gang(tmp_path)
    killed_at = time.time() - 5
    _state(worker, 3, host="n1", pid=203, heartbeat_at=killed_at - 0.5)  # SIGKILL: no word of its own
    seen = {"rank": 3, "local_rank": 1, "pid": 203, "time": killed_at, "exitcode": -9, "signal": "SIGKILL"}
    _state(worker, 2, host="n1", pid=202, ended_siblings=[{**seen, "seen_at_step": 14}])
    for rank in (0, 1):  # the ranks it took down with it, a moment later
        failure = {"type": "RuntimeError", "message": "connection reset", "time": killed_at + 1}
        _state(control, rank, host=HOST, pid=100 + rank, status="failed", failure=failure)
    pipeline = _start(control, hook, notify_on="failure")
    try:
        pipeline.gang_watch.check()  # type: ignore[union-attr]
        notice = hook.wait_for("failure")
        assert notice["rank"] == 3
        deadline = time.monotonic() + 10
        while not _points(got, Metric.GANG_RANK_FAILURES.name) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        pipeline.shutdown()
    failed = {p[Attr.RANK]: p for p in _points(got, Metric.GANG_RANK_FAILURES.name)}
    assert failed[3][Attr.GANG_FIRST] is True and failed[3][Attr.SIGNAL] == 9
    assert {r for r, p in failed.items() if not p[Attr.GANG_FIRST]} == {0, 1}
    [first] = _events(control, Event.GANG_FIRST_FAILURE)
    attrs = first["attributes"]
    assert (attrs[Attr.RANK], attrs[Attr.SIGNAL], attrs[Attr.PROCESS_EXIT_CODE]) == (3, 9, -9)
    assert sorted(attrs[Attr.GANG_CONSEQUENCES]) == [0, 1]
    assert hook.kinds() == ["failure"]  # once, for the first failure
