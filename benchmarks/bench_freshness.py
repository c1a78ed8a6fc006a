"""Freshness: delay from a report to its presence in the store, and in a live card payload.

    python -m benchmarks.bench_freshness [--samples 20] [--quick] [--json out.json]

Reports are made at random moments. The store delay is measured by polling the store; the payload
delay by running the card refresher (``TRAINCARD_REFRESH_INTERVAL``) against a card that records
each payload it is given, as Metaflow's ``current.card`` would receive it. Metaflow then writes the
payload and the card viewer polls for it (``card server --poll-interval``): that is outside this
package and not counted.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import report, spread


class RecordingCard:
    """Stands in for a Metaflow card: keeps the time each payload arrived."""

    def __init__(self) -> None:
        self.payloads: list[tuple[float, dict[str, Any]]] = []
        self.arrived = threading.Condition()

    def refresh(self, payload: dict[str, Any]) -> None:
        with self.arrived:
            self.payloads.append((time.perf_counter(), payload))
            self.arrived.notify_all()

    def wait_for(self, step: int, since: int, timeout_s: float = 30.0) -> float:
        """Arrival time of the first payload after index ``since`` whose probe chart shows ``step``."""
        deadline = time.monotonic() + timeout_s
        with self.arrived:
            while time.monotonic() < deadline:
                for arrived, payload in self.payloads[since:]:
                    if _shows(payload, step):
                        return arrived
                since = len(self.payloads)
                self.arrived.wait(0.5)
        raise TimeoutError(f"no payload showed step {step} within {timeout_s} s")


def _shows(payload: dict[str, Any], step: int) -> bool:
    return any(
        step in series["x"]
        for chart in payload["charts"]
        if chart["id"] == "probe"
        for series in chart["series"]
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """p50/p95 delays; targets: store ≤ flush interval + 1 s, payload ≤ flush + refresh interval."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    import traincard_otel
    from traincard_otel._read.load.reader import StoreReader
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel.metaflow.refresher import Refresher

    samples = 3 if args.quick else args.samples
    store_delays, payload_delays = [], []
    with tempfile.TemporaryDirectory() as tmp:
        # --quick only checks that the script runs: short cycles, so its waits are short too.
        cycle = 0.3 if args.quick else None
        reporter = traincard_otel.configure(
            store=f"file://{tmp}", flush_interval_s=cycle, refresh_interval_s=cycle
        )
        assert reporter.settings is not None
        flush = reporter.settings.flush_interval_s
        refresh = reporter.settings.refresh_interval_s
        card = RecordingCard()
        refresher = Refresher(LocalBackend(tmp), "bench", refresh, cards=lambda: [card]).start()
        reader = StoreReader(LocalBackend(tmp))
        for i in range(1, samples + 1):
            time.sleep(random.uniform(0, max(flush, refresh)))  # a random phase of both cycles
            seen = len(card.payloads)
            t0 = time.perf_counter()
            reporter.metrics({"probe": float(i)}, step=i)
            while True:
                series = reader.read().metrics.get("probe")
                if series is not None and series.steps and series.steps[-1] == i:
                    store_delays.append(time.perf_counter() - t0)
                    break
                time.sleep(0.02)
            payload_delays.append(card.wait_for(i, seen) - t0)
        refresher.stop()
        traincard_otel.shutdown()
    rows = []
    for name, values, target in (
        ("store", store_delays, flush + 1.0),
        ("live card payload", payload_delays, flush + refresh),
    ):
        s = spread(values)
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        rows.append(
            {"to": name, "p50_s": s["median"], "p95_s": p95, "max_s": ordered[-1], "target_s": target}
        )
    return report(
        "freshness",
        rows,
        ["to", "p50_s", "p95_s", "max_s", "target_s"],
        args.json,
        flush_interval_s=flush,
        refresh_interval_s=refresh,
    )


if __name__ == "__main__":
    main()
