"""Card rendering at scale: a store of N steps x 8 scalars -> load(), final HTML, live payload size.

    python -m benchmarks.bench_card_render [--steps 1000000] [--json out.json] [--quick]

The store is written through the real StoreWriter (segments of one flush interval's worth of rows,
as a run at ~500 steps/s would produce), then read back exactly as the card's final render does.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NAMES = ("loss", "learning_rate", "grad_norm", "eval_loss", "accuracy", "perplexity", "tokens", "margin")


def write_store(root: Path, steps: int, rows_per_segment: int = 1000) -> None:
    from traincard_otel.store import segment
    from traincard_otel.store.backends import LocalBackend
    from traincard_otel.store.writer import StoreWriter

    state = {
        "status": "finished",
        "step": steps,
        "progress": {"max_steps": steps},
        "started_at": 0.0,
        "updated_at": steps / 500,
        "heartbeat_at": steps / 500,
    }
    writer = StoreWriter(LocalBackend(root), attempt=0, rank=0, max_pending=rows_per_segment * 2)
    writer.set_state(state)
    for start in range(1, steps + 1, rows_per_segment):
        seg = list(range(start, min(start + rows_per_segment, steps + 1)))
        times = [s / 500 for s in seg]
        values = [math.sin(s / 1000 + i) + 2 for s in seg for i in range(len(NAMES))]
        n = len(seg)
        writer.add_many(  # packed runs, as the converter hands them over
            [
                segment.metric_run("train", NAMES, seg, times, values),
                segment.step_run(seg, times, [0.002] * n, [math.nan] * n, [32] * n, [0] * n),
            ]
        )
        writer.flush_now()


def measure(steps: int) -> dict[str, Any]:
    from traincard_otel import load
    from traincard_otel.card.payload import build_payload
    from traincard_otel.card.render import render_data

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        write_store(root, steps)
        write_s = time.perf_counter() - t0
        files = [p for p in root.rglob("*") if p.is_file()]
        stored = sum(p.stat().st_size for p in files)
        t0 = time.perf_counter()
        data = load(root)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        html = render_data(data, live=False, final=True)
        render_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        live = json.dumps(build_payload(data, live=True))
        live_s = time.perf_counter() - t0
    return {
        "steps": steps,
        "scalars": steps * len(NAMES),
        "files": len(files),
        "stored_bytes": stored,
        "bytes_per_scalar": stored / (steps * len(NAMES)),
        "write_s": write_s,
        "load_s": load_s,
        "render_s": render_s,
        "final_total_s": load_s + render_s,
        "html_bytes": len(html),
        "live_payload_bytes": len(live),
        "live_payload_s": live_s,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns (and prints) the figures per run length."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--quick", action="store_true", help="a tiny run that only checks the script works")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results = [measure(n) for n in ([2_000] if args.quick else args.steps)]
    header = ("steps", "files", "B/scalar", "load s", "render s", "html KiB", "live KiB")
    print(" ".join(f"{h:>9}" for h in header))
    for r in results:
        print(
            f"{r['steps']:>9} {r['files']:>6} {r['bytes_per_scalar']:>9.1f} {r['load_s']:>7.2f} "
            f"{r['render_s']:>9.2f} {r['html_bytes'] / 1024:>9.0f} {r['live_payload_bytes'] / 1024:>9.1f}"
        )
    out = {"benchmark": "card_render", "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
