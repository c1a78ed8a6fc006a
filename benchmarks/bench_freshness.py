"""Freshness: delay from a report to its presence in the store, and in a live card payload.

    python -m benchmarks.bench_freshness [--samples 20] [--quick] [--json out.json]

The live card adds its refresh period (``TRAINCARD_REFRESH_INTERVAL``) on top of the payload delay.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import report, spread


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """p50/p95 delays; targets: store ≤ flush interval + 1 s, payload ≤ flush + refresh interval."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    import traincard_otel
    from traincard_otel.card.payload import build_payload
    from traincard_otel.store.backends import LocalBackend
    from traincard_otel.store.reader import StoreReader

    samples = 3 if args.quick else args.samples
    store_delays, payload_delays = [], []
    with tempfile.TemporaryDirectory() as tmp:
        reporter = traincard_otel.configure(store=f"file://{tmp}")
        flush = reporter.settings.flush_interval_s
        refresh = reporter.settings.refresh_interval_s
        reader = StoreReader(LocalBackend(tmp))
        for i in range(1, samples + 1):
            time.sleep(random.uniform(0, flush))  # report at a random phase of the flush cycle
            t0 = time.perf_counter()
            reporter.metrics({"probe": float(i)}, step=i)
            while True:
                data = reader.read()
                series = data.metrics.get("probe")
                if series is not None and series.steps and series.steps[-1] == i:
                    store_delays.append(time.perf_counter() - t0)
                    break
                time.sleep(0.02)
            payload = build_payload(data, live=True)
            assert any(c["id"] == "probe" for c in payload["charts"])
            payload_delays.append(time.perf_counter() - t0)
        traincard_otel.shutdown()
    rows = []
    for name, values, target in (
        ("store", store_delays, flush + 1.0),
        ("live payload (+ refresh period)", [d + refresh for d in payload_delays], flush + refresh),
    ):
        s = spread(values)
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        rows.append({"to": name, "p50_s": s["median"], "p95_s": p95, "target_s": target})
    return report("freshness", rows, ["to", "p50_s", "p95_s", "target_s"], args.json)


if __name__ == "__main__":
    main()
