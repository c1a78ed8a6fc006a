"""Webhook notices against step time and exit time: none, an answering hook, a silent hook.

    python -m benchmarks.bench_notify [--steps 400] [--rounds 4] [--quick] [--json out.json]

Each round runs a loop of ``steps`` steps of about 1 ms of Python work each, reporting a loss and a
step end; a NaN loss every 50 steps is an anomaly, and so a notice (one per 60 s, the rate limit,
the rest counted). The webhook is none, a receiver on 127.0.0.1 that answers at once, or a socket
on 127.0.0.1 that accepts connections and never answers. Rows: the median step time and its ratio
to no hook, and the time ``shutdown()`` took with ``shutdown_timeout_s=1`` (the bound a silent hook
may cost at exit, no more).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from benchmarks._harness import interleave, report, spread
from benchmarks._webhooks import receiver, silent_endpoint

SHUTDOWN_S = 1.0


def _work() -> None:
    t = time.perf_counter() + 0.001
    while time.perf_counter() < t:
        pass


def _round(steps: int, url: str | None, exits: list[float]) -> float:
    import traincard_otel

    with tempfile.TemporaryDirectory() as store:
        reporter = traincard_otel.configure(
            store=store,
            notify=url,
            shutdown_timeout_s=SHUTDOWN_S,
            flush_interval_s=0.1,
            system=False,
            capture_console=False,
        )
        durations = []
        for step in range(1, steps + 1):
            t0 = time.perf_counter()
            _work()
            reporter.metrics({"loss": float("nan") if step % 50 == 0 else 1.0 / step}, step)
            reporter.step_end(step)
            durations.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        traincard_otel.shutdown()
        exits.append(time.perf_counter() - t0)
    return statistics.median(durations)


@contextlib.contextmanager
def _hooks() -> Iterator[dict[str, str | None]]:
    with receiver() as hook, silent_endpoint() as silent:
        yield {"no hook": None, "answering hook": hook.url, "silent hook": silent}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Median step time per case, its ratio to no hook, and the shutdown time."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    steps, rounds = (100, 1) if args.quick else (args.steps, args.rounds)
    with _hooks() as urls:
        exits: dict[str, list[float]] = {name: [] for name in urls}
        cases: dict[str, Callable[[], float]] = {
            name: functools.partial(_round, steps, url, exits[name]) for name, url in urls.items()
        }
        times = interleave(cases, rounds)
    base = statistics.median(times["no hook"])
    rows = [
        {
            "case": name,
            "step ms (median)": 1000 * spread(values)["median"],
            "vs no hook": statistics.median(values) / base,
            "shutdown s (max)": max(exits[name]),
            "rounds": len(values),
        }
        for name, values in times.items()
    ]
    return report("bench_notify", rows, None, args.json, steps=steps, shutdown_timeout_s=SHUTDOWN_S)


if __name__ == "__main__":
    main()
