"""Background cost: CPU of all our threads at 100 reported steps/s (8 scalars + a step end each),
system sampling at its default interval, store on.

    python -m benchmarks.bench_background [--seconds 140] [--rate 100] [--quick] [--json out.json]

The training thread's own CPU (the loop, sleeping most of the time) is subtracted from the
process's CPU; what is left is what the schedule (converter), store, sampler, watchdog and SDK threads used.
The breakdown times each background component's work with ``time.thread_time()`` around its
periodic call (converter drain, store flush, store compaction, system sample, OTel metric collection).
The default run lasts long enough for the store's first compaction (64 segments merged into one
Parquet part: 128 s at the default flush interval), which a shorter run would leave out.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._harness import report


def _account(obj: Any, method: str, label: str, cpu: dict[str, float]) -> Callable[[], None]:
    """Charge the thread CPU of every ``obj.method`` call to ``label``; returns an undo."""
    original = getattr(obj, method)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            cpu[label] += time.thread_time() - start

    setattr(obj, method, timed)
    return lambda: setattr(obj, method, original)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Share of one core used by background threads, in all and per component; target ≤ 1 %."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=140.0)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    seconds = 2.0 if args.quick else args.seconds
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    import traincard_otel
    from traincard_otel._write import pipeline as _pipeline
    from traincard_otel._write.telemetry.sampler import SystemSampler

    cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
    undo = [
        _account(SystemSampler, "sample_now", "system sampler", cpu),
        _account(PeriodicExportingMetricReader, "collect", "OTel metric collection", cpu),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.pop("TRAINCARD_SYSTEM", None)
        reporter = traincard_otel.configure(store=f"file://{tmp}")
        pipeline = _pipeline.active()
        assert pipeline is not None and pipeline.writer is not None
        from traincard_otel._store.segment import metric_run
        from traincard_otel._write.store.compaction import to_parquet

        to_parquet([(0, [metric_run(None, ["x"], [0], [0.0], [1.0])])])  # imports pyarrow: once a process

        undo += [
            _account(pipeline.converter, "drain", "converter", cpu),
            _account(pipeline.writer, "flush_now", "store writer", cpu),
            _account(pipeline.writer, "_maybe_compact", "store compaction", cpu),
        ]
        names = [f"metric_{i}" for i in range(8)]
        period = 1.0 / args.rate
        proc0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
        step, next_at = 0, wall0
        while time.perf_counter() - wall0 < seconds:
            step += 1
            # Full-precision values, as losses and learning rates are (short decimals are cheaper).
            reporter.metrics({name: 1.0 / (step + i + 0.3) for i, name in enumerate(names)}, step=step)
            reporter.step_end(step, duration_s=period)
            next_at += period
            time.sleep(max(0.0, next_at - time.perf_counter()))
        wall = time.perf_counter() - wall0
        background = (time.process_time() - proc0) - (time.thread_time() - thread0)
        # Compaction runs inside the writer's flush.
        cpu["store writer"] -= cpu["store compaction"]
        parts = pipeline.writer.parts_written
        breakdown = {label: seconds_used / wall * 100 for label, seconds_used in cpu.items()}
        traincard_otel.shutdown()
    for restore in undo:
        restore()
    row = {
        "steps": step,
        "wall_s": wall,
        "steps_per_s": step / wall,
        "background_cpu_s": background,
        "core_share_pct": background / wall * 100,
        "parts": parts,
    }
    out = report("background", [row], None, args.json, breakdown_pct=breakdown)
    ranked = sorted(breakdown.items(), key=lambda kv: -kv[1])
    print("  ".join(f"{label} {pct:.2f} %" for label, pct in ranked))
    return out


if __name__ == "__main__":
    main()
