"""The anomaly rules' cost in the converter: drain CPU with ``TRAINCARD_ANOMALIES`` on and off.

    python -m benchmarks.bench_anomalies [--steps 50000] [--rounds 6] [--quick] [--json out.json]

Each round reports ``steps`` steps (loss, grad_norm, learning_rate and five other scalars plus a
timed step end each, the shape of an HF run logging every step), then times one drain of the
converter (its thread CPU), once with the rules on and once off, in ABBA order. The rules run on
the converter's thread, never on the training thread: the row says what they add there.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import interleave, report, spread


def _drain_cpu(steps: int, rules: str) -> float:
    from traincard_otel.testing import capture

    os.environ["TRAINCARD_ANOMALIES"] = rules
    try:
        with capture() as cap:
            r = cap.reporter
            rng = random.Random(0)
            for step in range(1, steps + 1):
                values = {
                    "loss": 2.0 * math.exp(-step / 5000) + rng.gauss(0, 0.05),
                    "grad_norm": 1.0 + rng.random(),
                    "learning_rate": 1e-3,
                    **{f"metric_{i}": rng.random() for i in range(5)},
                }
                r.metrics(values, step=step)
                r.step_end(step, duration_s=0.1 + 0.01 * rng.random(), samples=16, tokens=512)
            start = time.thread_time()
            cap.drain()
            return time.thread_time() - start
    finally:
        os.environ.pop("TRAINCARD_ANOMALIES", None)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Drain CPU per 1k steps with the rules on and off, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    steps, rounds = (2000, 2) if args.quick else (args.steps, args.rounds)
    times = interleave(
        {"rules on": lambda: _drain_cpu(steps, ""), "rules off": lambda: _drain_cpu(steps, "off")}, rounds
    )
    rows = [
        {
            "case": name,
            "drain CPU ms / 1k steps": spread([1000 * t / (steps / 1000) for t in values])["median"],
            "rounds": len(values),
        }
        for name, values in times.items()
    ]
    on, off = (statistics.median(times[k]) for k in ("rules on", "rules off"))
    rows.append({"case": "on / off", "drain CPU ms / 1k steps": on / off, "rounds": rounds})
    return report("bench_anomalies", rows, None, args.json, steps=steps)


if __name__ == "__main__":
    main()
