"""Exit: time from the end of training to process exit, with nothing configured and with an
unreachable OTLP endpoint for all three signals.

    python -m benchmarks.bench_exit [--runs 3] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import report, spread

CHILD = (
    "import traincard_otel\n"
    "r = traincard_otel.configure()\n"
    "for s in range(500):\n"
    "    r.metrics({'loss': 1.0 / (s + 1)}, step=s)\n"
    "print('done', flush=True)\n"
)
DEAD_OTLP = {
    "OTEL_TRACES_EXPORTER": "otlp",
    "OTEL_METRICS_EXPORTER": "otlp",
    "OTEL_LOGS_EXPORTER": "otlp",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
}


def _exit_time(env: dict[str, str]) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
    t0 = time.monotonic()
    proc.wait(120)
    return time.monotonic() - t0


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Median exit times; target ≤ 2 s with a dead OTLP endpoint."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ, TRAINCARD_DIR=tmp, TRAINCARD_SYSTEM="false")
        for label, extra in (("nothing configured", {}), ("unreachable OTLP endpoint", DEAD_OTLP)):
            s = spread([_exit_time({**base, **extra}) for _ in range(runs)])
            rows.append({"case": label, "median_s": s["median"], "p75_s": s["p75"], "runs": s["n"]})
    return report("exit", rows, ["case", "median_s", "p75_s", "runs"], args.json)


if __name__ == "__main__":
    main()
