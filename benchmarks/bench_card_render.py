"""Card rendering at scale: a store of N steps x 8 scalars -> load(), final HTML, live payload size;
and a store of 1M log lines -> the log panel's payload (only the tail and the warnings go in).

    python -m benchmarks.bench_card_render [--steps 1000000] [--log-lines 1000000] [--json out.json] [--quick]

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
    from traincard_otel._store import segment
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._write.store.writer import StoreWriter

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
    from traincard_otel._read.card.render import render_data
    from traincard_otel._read.payload import build_payload

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


def write_log_store(root: Path, lines: int, per_segment: int = 20_000, ranks: int = 8) -> None:
    """``lines`` log lines from ``ranks`` ranks (console capture style), one warning in 1000 and
    one error in 100 000, written through the real StoreWriter."""
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._write.store.writer import StoreWriter

    writer = StoreWriter(LocalBackend(root), attempt=0, rank=0, max_pending=per_segment * 2)
    writer.set_state({"status": "running", "step": lines, "started_at": 0.0, "updated_at": lines / 1000})
    for start in range(0, lines, per_segment):
        batch = []
        for i in range(start, min(start + per_segment, lines)):
            level = "ERROR" if i % 100_000 == 99 else "WARNING" if i % 1000 == 7 else "INFO"
            attrs = {"traincard.rank": i % ranks, "log.iostream": "stderr" if level != "INFO" else "stdout"}
            batch.append(
                {"k": "l", "t": i / 1000, "lvl": level, "msg": f"step {i} loss {i % 97 / 10}", "a": attrs}
            )
        writer.add_many(batch)
        writer.flush_now()


def measure_logs(lines: int) -> dict[str, Any]:
    """Load a store of ``lines`` log lines and build the final and live payloads from it."""
    from traincard_otel import load
    from traincard_otel._read.card.render import render_data
    from traincard_otel._read.payload import build_payload

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_log_store(root, lines)
        t0 = time.perf_counter()
        data = load(root)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        final = build_payload(data, final=True)
        final_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        html = render_data(data, live=False, final=True)
        render_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        live = json.dumps(build_payload(data, live=True))  # the scan of the log is cached from here on
        live_s = time.perf_counter() - t0
    return {
        "log_lines": lines,
        "load_s": load_s,
        "final_payload_s": final_s,
        "render_s": render_s,
        "live_payload_s": live_s,
        "final_log_lines": len(final["logs"]),
        "html_bytes": len(html),
        "live_payload_bytes": len(live),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns (and prints) the figures per run length."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--quick", action="store_true", help="a tiny run that only checks the script works")
    parser.add_argument("--log-lines", type=int, default=1_000_000, help="0 skips the log-panel check")
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
    log_lines = 20_000 if args.quick else args.log_lines
    logs = [measure_logs(log_lines)] if log_lines else []
    if logs:
        print(
            " ".join(
                f"{h:>9}"
                for h in ("log lines", "load s", "payload s", "render s", "live s", "shown", "html KiB")
            )
        )
    for r in logs:
        print(
            f"{r['log_lines']:>9} {r['load_s']:>9.2f} {r['final_payload_s']:>9.3f} {r['render_s']:>9.3f} "
            f"{r['live_payload_s']:>9.3f} {r['final_log_lines']:>9} {r['html_bytes'] / 1024:>9.0f}"
        )
    out = {"benchmark": "card_render", "results": results, "logs": logs}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
