"""A sweep at scale: N foreach branches x M steps, compared from their summaries.

    python -m benchmarks.bench_sweep_scale [--branches 1000] [--steps 10000] [--quick] [--json out.json]

Each branch's store is written by the store writer (a loss and an accuracy per step, step ends,
hyperparameters, a state), laid out as a Metaflow local datastore (``Flow/run/step/task/traincard``),
with the summary its writer keeps (made from the same rows as they go by, as a pipeline's tally
makes it, and written by the writer as an object of its own). Then, side by side:

* the comparison card (``traincard render Flow/run/step``): every summary read and the page drawn
  (target: <= 3 s and <= 3 MB at 1,000 x 10,000);
* one branch's live Sweep section: a refresh that reads the siblings (their summaries all changed,
  or none), one between such reads, and the cost per refresh over time (target: <= 0.2 s);
* reading the stores themselves instead (``load()`` of a sample of branches, scaled to all).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import report


def _write_branch(folder: Path, index: int, steps: int, lr: float, pathspec: str) -> None:
    from traincard_otel._analysis.goodput_tally import GoodputTally
    from traincard_otel._analysis.summary_stream import SummaryTally
    from traincard_otel._schema import Event
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._store.segment import metric_run, step_run
    from traincard_otel._write.store.writer import StoreWriter

    writer = StoreWriter(LocalBackend(folder), attempt=0, rank=0, max_pending=10 * steps)
    start = time.time() - steps * 0.1
    xs = list(range(1, steps + 1))
    times = [start + 0.1 * s for s in xs]
    values: list[float] = []
    for s in xs:
        values += [2.0 / (1.0 + lr * s) + 0.01 * ((s * 7919 + index) % 13) / 13, min(1.0, lr * s / 1000)]
    hp = {"lr": str(lr), "seed": str(index % 3), "model": "tiny"}
    writer.add_many(
        [
            {"k": "e", "t": start, "n": Event.HYPERPARAMS, "b": hp},
            metric_run("train", ["loss", "eval_accuracy"], xs, times, values),
            step_run(xs, times, [0.1] * steps, [0.01] * steps, [8] * steps, [None] * steps),
        ]
    )
    status = "failed" if index % 97 == 5 else "finished"
    writer.set_state(
        {"status": status, "step": steps, "started_at": start, "heartbeat_at": times[-1], "attempt": 0}
    )
    tally, goodput = SummaryTally(), GoodputTally(start)
    tally.add_hyperparameters(hp)
    tally.add_run(["loss", "eval_accuracy"], xs, values)
    goodput.add_steps(xs, times, [0.1] * steps, [0.01] * steps)
    summary = tally.summary()
    figures = goodput.goodput(times[-1], running=False)
    summary.update(
        {
            "pathspec": pathspec,
            "status": status,
            "step": steps,
            "started_at": start,
            "updated_at": times[-1],
            "duration_s": times[-1] - start,
            "goodput": figures.ratio if figures is not None else None,
            "mfu": None,
            "sweep": {"split": "start", "parent": "", "index": index, "num_splits": None, "step": "train"},
            "joins": [],
            "attempt": 0,
            "rank": 0,
            "writer": writer.writer_id,
        }
    )
    writer.set_summary(summary)
    assert writer.flush_now()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Render time and size of the comparison, the live section's cost, and reading stores instead."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--branches", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    branches, steps = (30, 500) if args.quick else (args.branches, args.steps)
    from traincard_otel import load
    from traincard_otel._analysis.analysis import analyse
    from traincard_otel._read.card.render import render_comparison
    from traincard_otel._read.load.reader import read_store
    from traincard_otel._read.load.summaries import StepFolder
    from traincard_otel._read.payload import build_payload
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel.metaflow.live_sweep import SIBLING_READ_S, SIBLINGS_INTERVAL_S, LiveSweep

    with tempfile.TemporaryDirectory() as tmp:
        step_dir = Path(tmp) / "SweepBench" / "1" / "train"
        t0 = time.perf_counter()
        for i in range(branches):
            folder = step_dir / str(i + 1) / "traincard"
            _write_branch(folder, i, steps, lr=0.001 * (1 + i % 50), pathspec=f"SweepBench/1/train/{i + 1}")
        setup_s = time.perf_counter() - t0
        store_bytes = sum(p.stat().st_size for p in step_dir.rglob("*") if p.is_file())

        rows: list[dict[str, Any]] = []
        renders, sizes = [], []
        for _ in range(3):
            t1 = time.perf_counter()
            summaries = StepFolder(LocalBackend(step_dir / "1" / "traincard")).summaries()
            page = render_comparison(summaries, "SweepBench/1/train")
            renders.append(time.perf_counter() - t1)
            sizes.append(len(page.encode()))
        assert len(summaries) == branches
        rows.append(
            {
                "case": "comparison card (read summaries + render)",
                "seconds": statistics.median(renders),
                "bytes": sizes[-1],
            }
        )

        own = step_dir / str(branches) / "traincard"
        data = read_store(LocalBackend(own), source=f"SweepBench/1/train/{branches}")
        insights = analyse(data)
        position = {
            "split": "start",
            "parent": "",
            "index": branches - 1,
            "num_splits": None,
            "step": "train",
        }
        cold, warm, between = [], [], []
        for _ in range(3):
            live = LiveSweep(LocalBackend(own), f"SweepBench/1/train/{branches}", position=position)
            t2 = time.perf_counter()
            section = live.update(data, insights, force=True)
            cold.append(time.perf_counter() - t2)
            t2 = time.perf_counter()
            section = live.update(data, insights, force=True)
            warm.append(time.perf_counter() - t2)
            t2 = time.perf_counter()
            section = live.update(data, insights)
            between.append(time.perf_counter() - t2)
        size = len(json.dumps(section))
        payload = build_payload(data, live=True, insights=insights, sweep=section)
        every = SIBLINGS_INTERVAL_S + SIBLING_READ_S * branches
        rows += [
            {
                "case": "live Sweep: siblings read, every one changed",
                "seconds": statistics.median(cold),
                "bytes": size,
            },
            {
                "case": "live Sweep: siblings read, none changed",
                "seconds": statistics.median(warm),
                "bytes": size,
            },
            {
                "case": "live Sweep: a refresh between reads",
                "seconds": statistics.median(between),
                "bytes": size,
            },
            {
                "case": f"live Sweep: per 1 s refresh, all changing (read every {every:.0f} s)",
                "seconds": statistics.median(cold) / every + statistics.median(between),
                "bytes": size,
            },
        ]
        sample = list(range(1, branches + 1, max(branches // 10, 1)))[:10]
        t3 = time.perf_counter()
        for i in sample:
            load(str(step_dir / str(i)))
        per_load = (time.perf_counter() - t3) / len(sample)
        rows.append(
            {
                "case": f"load() every store instead ({len(sample)} timed, scaled)",
                "seconds": per_load * branches,
                "bytes": store_bytes,
            }
        )
    extra = {
        "branches": branches,
        "steps": steps,
        "setup_s": setup_s,
        "live_payload_bytes": len(json.dumps(payload)),
    }
    print(", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in extra.items()))
    return report("sweep_scale", rows, ["case", "seconds", "bytes"], args.json, **extra)


if __name__ == "__main__":
    main()
