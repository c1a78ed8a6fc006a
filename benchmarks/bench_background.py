"""Background cost: CPU of all our threads at 100 reported steps/s (8 scalars + a step end each),
system sampling at its default interval, store on.

    python -m benchmarks.bench_background [--seconds 20] [--quick] [--json out.json]

The training thread's own CPU (the loop, sleeping most of the time) is subtracted from the
process's CPU; what is left is what the pump, store, sampler, watchdog and SDK threads used.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import report


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Share of one core used by background threads; target ≤ 1 %."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    seconds = 2.0 if args.quick else args.seconds
    import traincard_otel

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.pop("TRAINCARD_SYSTEM", None)
        reporter = traincard_otel.configure(store=f"file://{tmp}")
        values = {f"metric_{i}": 0.5 for i in range(8)}
        period = 1.0 / args.rate
        proc0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
        step, next_at = 0, wall0
        while time.perf_counter() - wall0 < seconds:
            step += 1
            reporter.metrics(values, step=step)
            reporter.step_end(step, duration_s=period)
            next_at += period
            time.sleep(max(0.0, next_at - time.perf_counter()))
        wall = time.perf_counter() - wall0
        background = (time.process_time() - proc0) - (time.thread_time() - thread0)
        traincard_otel.shutdown()
    row = {
        "steps": step,
        "wall_s": wall,
        "steps_per_s": step / wall,
        "background_cpu_s": background,
        "core_share_pct": background / wall * 100,
    }
    return report("background", [row], list(row), args.json)


if __name__ == "__main__":
    main()
