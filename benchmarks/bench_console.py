"""Console capture's cost to the training thread: a loop printing a line per step, with and
without capture, side by side (child processes in ABBA order, stdout to /dev/null as a terminal
or a task log would take it).

python -m benchmarks.bench_console [--quick] [--steps N] [--pairs N] [--json out.json]

Each step does about 200 µs of Python work, then prints one line and flushes (as a loop printing
its loss does). The figure is the median step time with capture on over the same with it off.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import report, spread

CHILD = """
import json, sys, time
import traincard_otel
reporter = traincard_otel.Reporter()
steps = int(sys.argv[1])
times = []
for step in range(steps):
    t0 = time.perf_counter()
    x = 0
    for i in range(4000):
        x += i * i
    print(f"step {step} loss {1.0 / (step + 1):.6f}", flush=True)
    reporter.metric("loss", 1.0 / (step + 1), step)
    times.append(time.perf_counter() - t0)
reporter.close()
sys.stderr.write(json.dumps(times[steps // 10:]) + "\\n")
"""


def _child(steps: int, capture: bool, store: str) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
    env.update(
        TRAINCARD_DIR=store,
        TRAINCARD_SYSTEM="false",
        TRAINCARD_CAPTURE_CONSOLE="true" if capture else "false",
    )
    with open(os.devnull, "wb") as sink:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(steps)],
            stdout=sink,
            stderr=subprocess.PIPE,
            env=env,
            check=True,
        )
    times: list[float] = json.loads(out.stderr.decode().strip().splitlines()[-1])
    return times


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Median step time of the printing loop with capture off and on, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    steps, pairs = (300, 1) if args.quick else (args.steps, args.pairs)
    runs: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            for capture in (False, True) if i % 2 == 0 else (True, False):
                runs[capture].append(
                    spread(_child(steps, capture, os.path.join(tmp, f"r{i}{capture}")))["median"]
                )
    off, on = spread(runs[False])["median"], spread(runs[True])["median"]
    rows = [
        {"case": "capture off", "step_us": off * 1e6, "ratio": 1.0},
        {"case": "capture on", "step_us": on * 1e6, "ratio": on / off},
    ]
    out = report("console", rows, ["case", "step_us", "ratio"], args.json, steps=steps, pairs=pairs)
    print(f"capture adds {(on - off) * 1e6:+.1f} µs a printing step ({(on / off - 1) * 100:+.2f} %)")
    return out


if __name__ == "__main__":
    main()
