"""Store at scale through the real pipeline: N steps x 8 scalars reported by a Reporter, RSS over
the run (does the writer's memory grow with steps?), files and bytes per scalar, load() time.

    python -m benchmarks.bench_store_scale [--steps 1000000] [--quick] [--json out.json]

Reports are paced by a flush every 10k steps so the in-memory cap is never hit (nothing dropped).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from benchmarks._harness import report


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """RSS samples across the run and the size/load figures of the resulting store."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    steps = 20_000 if args.quick else args.steps
    import traincard_otel

    proc = psutil.Process()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRAINCARD_SYSTEM"] = "false"
        reporter = traincard_otel.configure(store=f"file://{tmp}")
        values = {f"metric_{i}": 0.5 for i in range(8)}
        t0 = time.perf_counter()
        for step in range(1, steps + 1):
            values["metric_0"] = 1.0 / step
            reporter.metrics(values, step=step)
            if step % 10_000 == 0:
                reporter.flush()
            if step % max(steps // 10, 1) == 0:
                rows.append(
                    {
                        "step": step,
                        "rss_mib": proc.memory_info().rss / 2**20,
                        "elapsed_s": time.perf_counter() - t0,
                    }
                )
        traincard_otel.shutdown()
        files = [p for p in Path(tmp).rglob("*") if p.is_file()]
        stored = sum(p.stat().st_size for p in files)
        t1 = time.perf_counter()
        run = traincard_otel.load(tmp)
        load_s = time.perf_counter() - t1
        assert run.metrics["metric_0"].steps[-1] == steps
    extra = {
        "steps": steps,
        "files": len(files),
        "bytes_per_scalar": stored / (steps * 8),
        "load_s": load_s,
        "rss_growth_mib": rows[-1]["rss_mib"] - rows[0]["rss_mib"],
        "dropped": run.stats["dropped"],
    }
    print(", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in extra.items()))
    return report("store_scale", rows, ["step", "rss_mib", "elapsed_s"], args.json, **extra)


if __name__ == "__main__":
    main()
