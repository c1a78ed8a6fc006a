"""Profiles on demand: what waiting for a request costs, and what a capture costs a profiled step.

    python -m benchmarks.bench_profiles [--polls 2000] [--captures 5] [--steps 10] [--quick] [--json F]

Idle: a rank that is not asked pays the watchdog's poll of the store's requests object every 3 s
(the one ``traincard stacks`` already made: stacks and profiles share it) and, on the training
thread, one attribute check per step end. The poll's CPU time (``thread_time``) and wall time are
measured on a local store with no request, with an answered one, and on an in-memory store; their
cost per hour of training is that times 1200 polls. The step end's cost is measured with nobody
asking, as the training thread pays it.

Capture: a raw loop of ``--step-ms`` CPU steps (the model of ``bench_anatomy``) is asked for
``--captures`` captures of ``--steps`` steps, one after another; each capture's summary gives the
median step just before it and while it recorded (the profiler's overhead per profiled step),
its start and its stop (on the training thread) and its export (on its own thread).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import report


def _poll_cost(backend: Any, polls: int) -> tuple[float, float]:
    """(CPU µs, wall µs) per poll of ``backend``'s requests, as the watchdog makes it."""
    from traincard_otel._write.telemetry.health import Watchdog

    dog = Watchdog(
        progress=lambda: (None, 0.0),
        recent_step_times=list,
        recent_wait_shares=list,
        gpu_utilization=list,
        emit=lambda *_a: None,
        backend=backend,
        rank=0,
        world_size=1,
        attempt=0,
        on_profile_request=lambda entry: None,
    )
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for _ in range(polls):
        dog.check_requests()
    return 1e6 * (time.thread_time() - cpu0) / polls, 1e6 * (time.perf_counter() - wall0) / polls


def _step_end_cost(steps: int, store: str) -> float:
    """ns per ``Reporter.step_end`` with nobody asking for a profile (one attribute checked)."""
    import traincard_otel

    reporter = traincard_otel.configure(store=store, system=False, capture_console=False)
    t0 = time.perf_counter()
    for step in range(steps):
        reporter.step_end(step, duration_s=0.01)
    took = time.perf_counter() - t0
    traincard_otel.shutdown()
    return 1e9 * took / steps


def _captures(step_ms: float, captures: int, steps: int, store: str) -> list[dict[str, Any]]:
    import traincard_otel
    from benchmarks.bench_anatomy import _setup, _step
    from traincard_otel._write import pipeline as _pipeline
    from traincard_otel._write.telemetry.profiler import Ask

    torch, model, opt, batch = _setup(step_ms)
    tracker: Any = traincard_otel.instrument(
        opt, model=model, store=store, system=False, capture_console=False
    )
    pipeline = _pipeline.active()
    assert pipeline is not None and pipeline.profiling is not None
    capture = pipeline.profiling.capture
    x = torch.randn(batch, 256)
    for i in range(captures):
        for _ in range(10):
            tracker.log(loss=_step(model, opt, x).detach(), batch=x)
        capture.ask(Ask(id=f"bench-{i}", steps=steps))
        while pipeline.queue.profile is not None:
            tracker.log(loss=_step(model, opt, x).detach(), batch=x)
        capture.close(120)
    traincard_otel.shutdown()
    found = traincard_otel.load(Path(store)).profiles
    return [c["ranks"][0] for c in found]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The idle poll's cost, the step end's, and a capture's cost per profiled step."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--polls", type=int, default=2000)
    parser.add_argument("--captures", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    polls, captures, steps = (50, 1, 3) if args.quick else (args.polls, args.captures, args.steps)
    from traincard_otel._store import requests
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel.testing import MemoryBackend

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        empty, asked = LocalBackend(Path(tmp) / "empty"), LocalBackend(Path(tmp) / "asked")
        requests.ask(asked, "stacks", {"id": "old", "time": 0.0})
        for name, backend in (("local store, no request", empty), ("local store, a request answered", asked)):
            cpu, wall = _poll_cost(backend, polls)
            rows += [
                {"case": f"poll, {name}: CPU µs", "value": cpu},
                {"case": f"poll, {name}: wall µs", "value": wall},
                {"case": f"poll, {name}: CPU ms per hour (1200 polls)", "value": cpu * 1200 / 1000},
            ]
        cpu, wall = _poll_cost(MemoryBackend(), polls)
        rows.append({"case": "poll, in-memory store: CPU µs", "value": cpu})
        rows.append(
            {
                "case": "step_end, nobody asking: ns",
                "value": _step_end_cost(20_000 if not args.quick else 500, tmp + "/steps"),
            }
        )
        found = _captures(args.step_ms, captures, steps, tmp + "/captures")
    for key, label in (
        ("step_before_s", "step before the capture: ms"),
        ("step_during_s", "profiled step: ms"),
        ("start_s", "profiler start (training thread): ms"),
        ("stop_s", "profiler stop and collection (training thread): ms"),
        ("export_s", "export, summary (its own thread): ms"),
    ):
        values = [c["cost"][key] for c in found if c["cost"].get(key) is not None]
        rows.append({"case": label, "value": 1000 * statistics.median(values) if values else None})
    overheads = [c["cost"]["overhead"] for c in found if c["cost"].get("overhead") is not None]
    rows.append(
        {
            "case": "profiled step overhead %",
            "value": 100 * statistics.median(overheads) if overheads else None,
        }
    )
    rows.append(
        {"case": "trace KB (gzip)", "value": statistics.median(c["trace_bytes"] for c in found) / 1000}
    )
    return report(
        "bench_profiles", rows, None, args.json, captures=len(found), steps=steps, step_ms=args.step_ms
    )


if __name__ == "__main__":
    main()
