"""A long run read back beside pyarrow: N steps x 8 scalars reported through a Reporter as a raw
loop reports them, then ``load()``, ``traincard render`` and a live card refresh, each in its own
process (wall time, CPU time, peak resident memory), and pyarrow reading the same numbers from one
Parquet file; ``command`` times ``traincard render`` as typed, from the process's start.

    python -m benchmarks.bench_long_run [--steps 1000000] [--flush-every 200] [--resumes 2]
        [--metrics-only] [--rounds 3] [--before REV [--before-store DIR]] [--store DIR] [--quick]
        [--json F]

The realistic case (the default): every step reports its 8 scalars and ends with
``step_end(step, duration_s=0.01)``; the run flushes every ``--flush-every`` steps (200: every 2 s
of the simulated 10 ms steps, as the flush schedule does), and is written by ``--resumes + 1``
processes, each resuming from a checkpoint a little before where the previous one stopped (its
steps run again). ``--metrics-only`` reports the scalars alone, flushing every 10 000 steps, in
one process (the case measured before step ends were in it). Building the store measures what
reporting costs: CPU per scalar, all threads, and the training thread's own share (its CPU less
the flushes it asked for, whose work the flush schedule's thread does in a real run); the
objects the store holds at the end say what compaction left.

The store is built once per run. ``--before REV`` also times the code of git revision ``REV``
(checked out into a temporary folder), in alternating order, so the two sides share the machine's
state: on the same store, or on a store ``REV``'s own writer built (``--before-store``, built
by ``REV`` when missing) where the store format changed between them. The refresh case reads the
whole store, then (as the live card does every few seconds) two seconds' worth of new rows, 1 000
steps, and times that second read and the live payload built from it, with the whole-series heads
due (their slowest refresh).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import report, spread

NAMES = 8
ROOT = Path(__file__).resolve().parent.parent

# Each case runs in a fresh interpreter: ru_maxrss is the process's peak, imports included.
CHILD = r"""
import json, resource, sys, time

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

case, store, extra = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
if case == "pyarrow":
    import pyarrow.parquet as pq
    c0, t0 = cpu(), time.perf_counter()
    table = pq.ParquetFile(extra).read()
    assert table.num_rows > 0
elif case == "load":
    import traincard_otel
    c0, t0 = cpu(), time.perf_counter()
    run = traincard_otel.load(store)
    assert len(run.metrics["metric_0"]) > 0 and run.metrics["metric_0"].values[-1] > 0
elif case == "render":
    from traincard_otel._cli import main
    c0, t0 = cpu(), time.perf_counter()
    assert main(["render", store, "-o", extra]) == 0
    out["card_bytes"] = __import__("os").path.getsize(extra)
elif case == "command":  # `traincard render` as a user types it: the process's start and imports too
    import subprocess
    c0, t0 = cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "traincard_otel", "render", store, "-o", extra], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = child.ru_utime + child.ru_stime
    print(json.dumps({"wall_s": wall, "cpu_s": cpu_s, "peak_mb": child.ru_maxrss / 1024}))
    sys.exit(0)
elif case == "refresh":
    import os
    import traincard_otel._read.payload.series as display
    from traincard_otel._read.payload import build_payload
    from traincard_otel._store import segment
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._read.load.reader import StoreReader
    from traincard_otel._write.store.writer import StoreWriter

    backend = LocalBackend(store)
    reader = StoreReader(backend)
    build_payload(reader.read(), live=True)  # the refresher's earlier refreshes
    last = reader.data.metrics["metric_0"]
    step, at = int(last.steps[-1]), float(last.times[-1])
    steps = list(range(step + 1, step + 1001))
    names = [f"metric_{i}" for i in range(8)]
    writer = StoreWriter(backend, attempt=0, rank=0, max_pending=4000)
    times = [at + (s - step) / 500 for s in steps]
    writer.add_many([segment.metric_run("train", names, steps, times,
                                        [1.0 / s if i == 0 else 0.5 for s in steps for i in range(8)])])
    if reader.data.step_times:  # as the run reported them: a step end a step
        n = len(steps)
        writer.add_many([segment.step_run(steps, times, [0.01] * n, [float("nan")] * n, [0] * n, [0] * n)])
    writer.flush_now()
    for key in list(display._head_cache):  # the whole-series heads are due on this refresh
        series, _at, xy = display._head_cache[key]
        display._head_cache[key] = (series, -1e9, xy)
    c0, t0 = cpu(), time.perf_counter()
    payload = build_payload(reader.read(), live=True)
    out["payload_bytes"] = len(json.dumps(payload))
    assert reader.data.metrics["metric_0"].steps[-1] == steps[-1]
out.update(wall_s=time.perf_counter() - t0, cpu_s=cpu() - c0,
           peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(out))
"""


WRITE = r"""
import json, os, resource, sys, threading, time
os.environ["TRAINCARD_SYSTEM"] = "false"
import traincard_otel
store, step_end = sys.argv[1], sys.argv[5] == "1"
first, last, every = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

reporter = traincard_otel.configure(store=f"file://{store}")
values = {f"metric_{i}": 0.5 for i in range(8)}
c0, m0, flushing = cpu(), time.thread_time(), 0.0
for step in range(first, last + 1):
    values["metric_0"] = 1.0 / step
    reporter.metrics(values, step=step)
    if step_end:
        reporter.step_end(step, duration_s=0.01)
    if step % every == 0:
        f0 = time.thread_time()
        reporter.flush()
        flushing += time.thread_time() - f0
training = time.thread_time() - m0 - flushing
traincard_otel.shutdown()
print(json.dumps({"cpu_s": cpu() - c0, "training_cpu_s": training, "scalars": 8 * (last - first + 1)}))
"""

WIDE = r"""
import sys
import pyarrow as pa, pyarrow.parquet as pq
import traincard_otel
store, wide = sys.argv[1], sys.argv[2]
run = traincard_otel.load(store)
first = run.metrics["metric_0"]
columns = {"step": pa.array(list(first.steps), pa.int64()), "time": pa.array(list(first.times), pa.float64())}
for i in range(8):
    columns[f"metric_{i}"] = pa.array(list(run.metrics[f"metric_{i}"].values), pa.float64())
if run.step_times:  # the step ends: their time and duration (one a step, as the metric rows)
    steps = run.step_times[0]
    assert len(steps) == len(first), (len(steps), len(first))
    columns["step_end_time"] = pa.array(list(steps.times), pa.float64())
    columns["step_time"] = pa.array(list(steps.values), pa.float64())
pq.write_table(pa.table(columns), wide, compression="zstd")
print(len(first))
"""


def stretches(steps: int, resumes: int) -> list[tuple[int, int]]:
    """The steps each process of the run reports: equal stretches, each after the first resuming
    1 % of a stretch before where the previous one stopped."""
    size = steps // (resumes + 1)
    back = size // 100
    out = [(1, size)]
    for k in range(1, resumes + 1):
        out.append((k * size - back + 1, steps if k == resumes else (k + 1) * size))
    return out


def build(store: Path, wide: Path, args: argparse.Namespace, code: Path) -> dict[str, Any]:
    """The store through a Reporter, one process a stretch (what reporting cost, summed), then
    its numbers as one Parquet file of one row per step, read back by load()."""
    env = {**os.environ, "PYTHONPATH": str(code), "USER": os.environ.get("USER", "bench")}
    costs = {"cpu_s": 0.0, "training_cpu_s": 0.0, "scalars": 0}
    for lo, hi in stretches(args.steps, args.resumes):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                WRITE,
                str(store),
                str(lo),
                str(hi),
                str(args.flush_every),
                str(int(args.step_end)),
            ],
            check=True,
            env=env,
            cwd=code,
            capture_output=True,
            text=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        for key in costs:
            costs[key] += got[key]
    subprocess.run([sys.executable, "-c", WIDE, str(store), str(wide)], check=True, env=env, cwd=code)
    objects = sum(1 for p in store.rglob("*") if p.is_file())
    return {
        "write_us_per_scalar": 1e6 * costs["cpu_s"] / costs["scalars"],
        "training_us_per_scalar": 1e6 * costs["training_cpu_s"] / costs["scalars"],
        "objects": objects,
        "store_mb": sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) / 1e6,
    }


def child(case: str, store: Path, extra: str, code: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code), "USER": os.environ.get("USER", "bench")}
    # run from the code's folder: ``python -c`` puts the working directory first on sys.path
    out = subprocess.run(
        [sys.executable, "-c", CHILD, case, str(store), extra],
        check=True,
        env=env,
        cwd=code,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def checkout(rev: str, into: Path) -> Path:
    """The package as it was at ``rev`` (git archive), importable from ``into``."""
    archive = subprocess.run(
        ["git", "archive", rev, "traincard_otel"], cwd=ROOT, check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Each case's median wall and CPU time and peak memory, per code version; the ratios to pyarrow."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument(
        "--flush-every", type=int, default=200, help="steps between flushes (200: 2 s of 10 ms steps)"
    )
    parser.add_argument("--resumes", type=int, default=2, help="times the run is resumed (a process each)")
    parser.add_argument(
        "--metrics-only", action="store_true", help="no step ends, a flush every 10 000 steps, one process"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--before",
        default=None,
        help="a git revision (or a folder holding its traincard_otel) to time beside",
    )
    parser.add_argument(
        "--before-store", default=None, help="the store REV reads (its folder; built by REV if missing)"
    )
    parser.add_argument("--cases", default="pyarrow,load,render,command,refresh")
    parser.add_argument("--store", default=None, help="reuse a store built by an earlier run (its folder)")
    parser.add_argument("--quick", action="store_true", help="20k steps, one round")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    args.step_end = not args.metrics_only
    if args.metrics_only:
        args.flush_every, args.resumes = 10_000, 0
    if args.quick:
        args.steps, args.rounds = 20_000, 1
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        codes = {"after": ROOT}
        if args.before and Path(args.before).is_dir():  # a folder holding an older traincard_otel
            codes["before"] = Path(args.before).resolve()
        elif args.before:
            codes["before"] = checkout(args.before, Path(tempfile.mkdtemp(dir=tmp)))
        store = Path(args.store) if args.store else tmp / "store"
        wide = store.parent / (store.name + "-wide.parquet")
        written: dict[str, dict[str, Any]] = {}
        if not wide.exists():
            t0 = time.perf_counter()
            written["after"] = build(store, wide, args, ROOT)
            print(
                f"built {args.steps} steps x {NAMES} scalars in {time.perf_counter() - t0:.0f} s:",
                json.dumps(written["after"]),
                flush=True,
            )
        stores = {"after": store, "before": store}
        if args.before and args.before_store:
            stores["before"] = Path(args.before_store)
            before_wide = stores["before"].parent / (stores["before"].name + "-wide.parquet")
            if not before_wide.exists():
                written["before"] = build(stores["before"], before_wide, args, codes["before"])
                print("before:", json.dumps(written["before"]), flush=True)
        results: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for r in range(args.rounds):
            order = list(codes) if r % 2 == 0 else list(reversed(codes))
            for case in cases:
                for version in ["pyarrow"] if case == "pyarrow" else order:
                    # the refresh writes into its store: each gets a copy of the store
                    target = stores.get(version, store)
                    if case == "refresh":
                        target = tmp / f"copy-{version}-{r}"
                        subprocess.run(["cp", "-r", str(stores.get(version, store)), str(target)], check=True)
                    extra = str(wide) if case == "pyarrow" else str(tmp / "card.html")
                    got = child(case, target, extra, codes.get(version, ROOT))
                    results.setdefault(case, {}).setdefault(version, []).append(got)
                    print(r, case, version, json.dumps(got), flush=True)
    base = spread([g["wall_s"] for g in results.get("pyarrow", {}).get("pyarrow", [])] or [float("nan")])
    base_cpu = spread([g["cpu_s"] for g in results.get("pyarrow", {}).get("pyarrow", [])] or [float("nan")])
    rows = []
    for case, versions in results.items():
        for version, runs in versions.items():
            row: dict[str, Any] = {"case": case, "code": version, "rounds": len(runs)}
            for figure in runs[0]:
                row[figure] = spread([g[figure] for g in runs])["median"]
            row["wall_x_pyarrow"] = row["wall_s"] / base["median"]
            row["cpu_x_pyarrow"] = row["cpu_s"] / base_cpu["median"]
            rows.append(row)
    columns = ["case", "code", "wall_s", "cpu_s", "peak_mb", "wall_x_pyarrow", "cpu_x_pyarrow"]
    for version, figures in written.items():
        print(version, "writing:", ", ".join(f"{k} {v:.3g}" for k, v in figures.items()))
    return report(
        "long_run",
        rows,
        columns,
        args.json,
        steps=args.steps,
        scalars=args.steps * NAMES,
        flush_every=args.flush_every,
        resumes=args.resumes,
        step_end=args.step_end,
        written=written,
    )


if __name__ == "__main__":
    main()
