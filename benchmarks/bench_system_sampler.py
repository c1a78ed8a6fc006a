"""System sampler cost: CPU time per sample (psutil host/process figures, NVML when present).

python -m benchmarks.bench_system_sampler [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import report, spread


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """CPU per sample and the share of one core it costs at the default interval."""
    from traincard_otel._write.telemetry import SystemSampler

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    sampler = SystemSampler()
    if sampler.gpu is not None:
        sampler.gpu.start()
    per_round = 20 if args.quick else 200
    costs = []
    for _ in range(3 if args.quick else 10):
        t0 = time.process_time()
        for _ in range(per_round):
            sampler.sample_now()
        costs.append((time.process_time() - t0) / per_round)
    s = spread(costs)
    share = s["median"] / sampler.interval_s
    row = {
        "cpu_ms_per_sample": s["median"] * 1e3,
        "p25_ms": s["p25"] * 1e3,
        "p75_ms": s["p75"] * 1e3,
        "interval_s": sampler.interval_s,
        "core_share_pct": share * 100,
        "gpu_notes": "; ".join(sampler.notes),
    }
    return report(
        "system_sampler",
        [row],
        ["cpu_ms_per_sample", "p25_ms", "p75_ms", "interval_s", "core_share_pct"],
        args.json,
    )


if __name__ == "__main__":
    main()
