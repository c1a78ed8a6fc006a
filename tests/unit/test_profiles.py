"""Profile captures below the command: the trace's breakdown (GPU and CPU), the cut of an
oversized trace, a capture in process (its trace, summary and cost), and ``profile_on``'s
triggers (once per kind inside the window; a straggler asks every rank through the store)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.profile import breakdown
from traincard_otel._store import requests
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.telemetry import profile_trace
from traincard_otel._write.telemetry.profiler import Ask

from tests.support.loops import mlp, train

torch = pytest.importorskip("torch")


def _x(name: str, ts: float, dur: float, cat: str = "kernel", tid: int = 7) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 0, "tid": tid}


def test_a_gpu_trace_splits_into_computation_communication_memory_and_idle() -> None:
    events = [
        _x("ampere_sgemm_128x64", 0, 100),  # computation 0-100
        _x("ncclKernel_AllReduce_RING_LL_Sum_float", 50, 100),  # communication 50-150: half hidden
        _x("Memcpy HtoD (Pageable -> Device)", 160, 20, cat="gpu_memcpy"),  # memory 160-180
        _x("void at::native::vectorized_elementwise_kernel", 200, 50),  # computation 200-250, idle 180-200
        _x("aten::mm", 0, 300, cat="cpu_op", tid=1),  # host operators do not count on a GPU
    ]
    b = breakdown(events)
    assert b.device and b.span_s == pytest.approx(250e-6)
    assert b.seconds == pytest.approx(
        {"computation": 150e-6, "communication": 50e-6, "memory": 20e-6, "idle": 30e-6}
    )
    assert b.overlap == pytest.approx(0.5) and sum(b.shares.values()) == pytest.approx(1)


def test_a_cpu_trace_splits_the_profiled_steps_of_the_training_thread() -> None:
    events = [
        _x("ProfilerStep#3", 0, 1000, cat="user_annotation", tid=1),
        _x("aten::addmm", 100, 300, cat="cpu_op", tid=1),
        _x("aten::add", 200, 50, cat="cpu_op", tid=1),  # nested: counted once
        _x("c10d::allreduce_", 500, 200, cat="cpu_op", tid=1),
        _x("aten::mm", 0, 1000, cat="cpu_op", tid=9),  # another thread's: not the training thread's
        _x("aten::relu", 1500, 100, cat="cpu_op", tid=1),  # outside the profiled steps
    ]
    b = breakdown(events)
    assert not b.device and b.overlap is None and b.span_s == pytest.approx(1e-3)
    assert b.seconds == pytest.approx({"computation": 300e-6, "communication": 200e-6, "other": 500e-6})


def test_an_oversized_trace_keeps_its_earliest_events_and_counts_the_cut() -> None:
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}}]
    events += [_x(f"op{i % 7}-{i}", float(i), 1.0, cat="cpu_op") for i in range(5000)]
    whole, kept, cut = profile_trace.fit({"traceEvents": events}, limit=10**9)
    assert cut == 0 and kept == 5001
    data, kept, cut = profile_trace.fit({"traceEvents": events}, limit=len(whole) // 4)
    assert len(data) <= len(whole) // 4 and cut > 0 and kept + cut == 5001
    trace = json.loads(gzip.decompress(data))
    timed = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert trace["traceEvents"][0]["ph"] == "M" and [e["ts"] for e in timed] == list(range(len(timed)))
    assert trace["traincard_cut_events"] == cut


def _loop(**settings: Any) -> tuple[Any, Any, Any]:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return traincard_otel.instrument(opt, model=model, **settings), model, opt


def test_a_capture_in_process_writes_its_trace_and_summary_and_cuts_an_oversized_trace(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(profile_trace, "MAX_TRACE_BYTES", 4000)
    tracker, model, opt = _loop()
    pipeline = _pipeline.active()
    assert pipeline is not None and pipeline.profiling is not None
    train(tracker, model, opt, 4)
    capture = pipeline.profiling.capture
    assert capture.ask(Ask(id="in-process", steps=4)) and not capture.ask(Ask(id="another"))  # one at a time
    train(tracker, model, opt, 12)
    capture.close(30)
    assert capture.latest is not None and capture.latest["status"] == "done"
    assert pipeline.queue.profile is None  # the training thread checks one attribute again
    traincard_otel.shutdown()
    [found] = traincard_otel.load(store_dir).profiles
    summary = found["ranks"][0]
    assert found["steps"] == [10, 13]  # asked after step 4: steps 5-8 timed unprofiled, 9 warms up
    assert summary["trace_bytes"] <= 4000 and summary["trace_events_cut"] > 0
    cost = summary["cost"]
    assert cost["step_before_s"] > 0 and cost["step_during_s"] > 0 and cost["overhead"] is not None
    trace = json.loads(gzip.decompress(Path(summary["trace_location"]).read_bytes()))
    assert trace["traincard_cut_events"] == summary["trace_events_cut"]
    assert [e for e in run_events(store_dir) if e["name"] == "traincard.profile.captured"]


def run_events(store: Path) -> list[dict[str, Any]]:
    return traincard_otel.load(store).events


def test_profile_on_throughput_drop_captures_once_inside_the_window(store_dir: Path) -> None:
    tracker, model, opt = _loop(
        profile_on="throughput_drop", anomalies="throughput_steps=3,min_points=10", flush_interval_s=0.2
    )
    pipeline = _pipeline.active()
    assert pipeline is not None and pipeline.profiling is not None
    detector = pipeline.converter.anomalies.detector
    assert detector is not None
    for drop in (1, 2):  # two slowdowns: a throughput drop each, one capture
        train(tracker, model, opt, 30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and detector.counts["throughput_drop"] < drop:
            train(tracker, model, opt, 1, sleep_s=0.1)  # planted: many times slower
        train(tracker, model, opt, 12)  # the capture's steps (4 timed, 1 warm-up, 5 recorded)
        pipeline.profiling.capture.close(30)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    kinds = [
        e["attributes"]["traincard.anomaly.kind"] for e in run.events if e["name"] == "traincard.anomaly"
    ]
    assert kinds.count("throughput_drop") >= 2, kinds  # (a busy machine may add one)
    [found] = run.profiles
    assert found["trigger"] == "throughput_drop" and "below 50% of the median" in found["detail"]


def test_a_straggler_asks_every_rank_once_inside_the_window(tmp_path: Path) -> None:
    from traincard_otel.testing import MemoryBackend, capture

    store = MemoryBackend()

    def state(rank: int, forward: float, wait: float) -> dict[str, Any]:
        seconds = {
            "data": 0.001,
            "forward": forward,
            "backward": 0.02,
            "optimizer": 0.005,
            "communication": wait,
        }
        return {
            "rank": rank,
            "attempt": 0,
            "status": "running",
            "anatomy": {"steps": 50, "step_s": 0.1, "own_s": 0.1 - wait, "seconds": seconds},
        }

    with capture(store=store, profile_on="straggler") as cap:
        profiling = cap.pipeline.profiling
        assert profiling is not None
        profiling.states([state(0, 0.01, 0.06), state(1, 0.07, 0.0), state(2, 0.01, 0.06)])
        asked = requests.read(store)["profile"]
        assert asked["trigger"] == "straggler" and asked["ranks"] == "all"
        assert asked["detail"].startswith("rank 1 is the straggler: forward 70 ms vs 10 ms")
        store.write("requests/ranks.json", b"{}")
        profiling.states([state(0, 0.01, 0.06), state(1, 0.07, 0.0), state(2, 0.01, 0.06)])
        assert requests.read(store) == {}  # once per 30 minutes


def test_profile_on_is_a_list_of_known_kinds_from_an_argument_or_the_variable() -> None:
    from traincard_otel._config import resolve
    from traincard_otel.exceptions import ConfigError

    assert resolve({"profile_on": ["throughput_drop", "straggler"]}, {}).profile_on == (
        "throughput_drop",
        "straggler",
    )
    assert resolve({}, {"TRAINCARD_PROFILE_ON": "straggler, throughput_drop"}).profile_on == (
        "straggler",
        "throughput_drop",
    )
    assert resolve({}, {}).profile_on == () and resolve({}, {}).anatomy and not resolve({}, {}).memory_history
    with pytest.raises(ConfigError, match="unknown kind"):
        resolve({}, {"TRAINCARD_PROFILE_ON": "stall"})
    assert resolve({}, {"TRAINCARD_ANATOMY": "false", "TRAINCARD_MEMORY_HISTORY": "true"}).memory_history
