"""Console capture's cost: to the training thread, to the other threads, and the GIL they hold.

python -m benchmarks.bench_console [--quick] [--steps N] [--pairs N] [--json out.json]

Child processes in ABBA order, stdout to /dev/null as a terminal or a task log would take it:

- *a printing loop*: each step does about 200 µs of Python work, then prints one line and flushes
  (as a loop printing its loss does). The figure is the median step time with capture on over the
  same with it off.
- *printed lines*: a loop that waits for its "GPU" (sleeps 2 ms a step, the GIL free) and prints
  10 lines a step. Read: the other threads' CPU per printed line (the process's CPU less the
  training thread's and the probe's, capture on less capture off), and the GIL the other threads
  held at a time, as a probe thread sees it: it sleeps 0.2 ms in a loop and measures how late it
  wakes (a late wake-up is the GIL held by another thread, or no core free): its 99th percentile
  and its longest, capture on and off.
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


LINES_CHILD = """
import json, resource, sys, threading, time
import traincard_otel
reporter = traincard_otel.Reporter()
steps, per = int(sys.argv[1]), 10
late, stop, probe_cpu = [], [], []

def probe():
    while not stop:
        t0 = time.perf_counter()
        time.sleep(0.0002)
        late.append(time.perf_counter() - t0 - 0.0002)
    probe_cpu.append(time.thread_time())

thread = threading.Thread(target=probe, daemon=True)
thread.start()
usage = resource.getrusage(resource.RUSAGE_SELF)
c0, m0 = usage.ru_utime + usage.ru_stime, time.thread_time()
for step in range(steps):
    for k in range(per):
        print(f"{{'loss': {1.0 / (step + 1):.4f}, 'grad_norm': 1.25}} {k}", flush=True)
    time.sleep(0.002)
main = time.thread_time() - m0
reporter.close()  # what the lines cost the other threads is done by now
stop.append(True)
thread.join()
usage = resource.getrusage(resource.RUSAGE_SELF)
others = usage.ru_utime + usage.ru_stime - c0 - main - probe_cpu[0]
late.sort()
figures = {"others_s": others, "lines": steps * per, "late_p99_s": late[int(0.99 * len(late))]}
sys.stderr.write(json.dumps({**figures, "late_max_s": late[-1]}) + "\\n")
"""


def _env(capture: bool, store: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
    env.update(
        TRAINCARD_DIR=store,
        TRAINCARD_SYSTEM="false",
        TRAINCARD_CAPTURE_CONSOLE="true" if capture else "false",
    )
    return env


def _run(script: str, steps: int, capture: bool, store: str) -> Any:
    """A child running ``script``: what it wrote last to its stderr, as JSON."""
    with open(os.devnull, "wb") as sink:
        out = subprocess.run(
            [sys.executable, "-c", script, str(steps)],
            stdout=sink,
            stderr=subprocess.PIPE,
            env=_env(capture, store),
            check=True,
        )
    return json.loads(out.stderr.decode().strip().splitlines()[-1])


def _lines_child(steps: int, capture: bool, store: str) -> dict[str, float]:
    figures: dict[str, float] = _run(LINES_CHILD, steps, capture, store)
    return figures


def _child(steps: int, capture: bool, store: str) -> list[float]:
    times: list[float] = _run(CHILD, steps, capture, store)
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
    lines: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            for capture in (False, True) if i % 2 == 0 else (True, False):
                runs[capture].append(
                    spread(_child(steps, capture, os.path.join(tmp, f"r{i}{capture}")))["median"]
                )
                lines[capture].append(_lines_child(steps // 3, capture, os.path.join(tmp, f"l{i}{capture}")))
    off, on = spread(runs[False])["median"], spread(runs[True])["median"]

    def median(capture: bool, key: str) -> float:
        return spread([f[key] / (f["lines"] if key == "others_s" else 1) for f in lines[capture]])["median"]

    per_line = {capture: median(capture, "others_s") * 1e6 for capture in (False, True)}
    rows: list[dict[str, Any]] = [
        {
            "case": f"capture {'on' if capture else 'off'}",
            "step_us": step * 1e6,
            "ratio": step / off,
            "others_us_per_line": per_line[capture],
            "probe_late_p99_ms": median(capture, "late_p99_s") * 1e3,
            "probe_late_max_ms": median(capture, "late_max_s") * 1e3,
        }
        for capture, step in ((False, off), (True, on))
    ]
    out = report("console", rows, None, args.json, steps=steps, pairs=pairs)
    print(f"capture adds {(on - off) * 1e6:+.1f} µs a printing step ({(on / off - 1) * 100:+.2f} %)")
    per_line_added = per_line[True] - per_line[False]
    print(f"and {per_line_added:.1f} µs of the other threads' CPU a printed line")
    return out


if __name__ == "__main__":
    main()
