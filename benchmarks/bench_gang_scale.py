"""A whole gang at scale: 64 ranks x 100k steps on 8 nodes, side by side with one rank as long.

    python -m benchmarks.bench_gang_scale [--ranks 64] [--nodes 8] [--steps 100000] [--json F] [--quick]
                                          [--store DIR]

The gang store is laid out as a Metaflow ``@parallel`` step writes it (one task folder per node,
``gang.json`` and the control task's ``gang/node-<i>.json``), through the real StoreWriter: rank 0
reports 8 metrics per step, every rank its step times; each node's step process its state. Each
case is then measured in a fresh process: ``load()`` of a worker task (the whole gang comes with
it), the final card render, the HTML size, and the process's peak memory (max RSS).
``--store DIR`` keeps the written stores in ``DIR`` and reuses them when the same shape is asked
for again (writing 64 x 100k steps takes longer than measuring them).

Targets (issue 30): the 64-rank card renders in <= 3 s and <= 2 MB, load() <= 5 s, memory <= 1 GB.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NAMES = ("loss", "learning_rate", "grad_norm", "eval_loss", "accuracy", "perplexity", "tokens", "margin")
ROWS_PER_SEGMENT = 1_000  # a flush every 2 s at 500 steps/s: the writer compacts 64 at a time


def _write_rank(folder: Path, rank: int, local: int, node: int, world: int, steps: int) -> None:
    from traincard_otel._store import segment
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._write.store.writer import StoreWriter

    writer = StoreWriter(LocalBackend(folder), attempt=0, rank=rank, max_pending=ROWS_PER_SEGMENT * 2)
    writer.set_state(
        {
            "status": "finished",
            "step": steps,
            "progress": {"max_steps": steps},
            "started_at": 0.0,
            "updated_at": steps / 500,
            "heartbeat_at": steps / 500,
            "host": f"node{node}",
            "pid": 1000 + rank,
            "local_rank": local,
            "node_rank": node,
            "world_size": world,
            "rank_timeout_s": 120.0,
        }
    )
    slow = 1.3 if rank == world - 1 else 1.0  # one straggler, for the analysis to find
    for start in range(1, steps + 1, ROWS_PER_SEGMENT):
        seg = list(range(start, min(start + ROWS_PER_SEGMENT, steps + 1)))
        times = [s / 500 for s in seg]
        n = len(seg)
        runs = [segment.step_run(seg, times, [0.002 * slow] * n, [0.0004] * n, [32] * n, [0] * n)]
        if rank == 0:
            values = [math.sin(s / 1000 + i) + 2 for s in seg for i in range(len(NAMES))]
            runs.insert(0, segment.metric_run("train", NAMES, seg, times, values))
        writer.add_many(runs)
        writer.flush_now()
    writer.close(10.0)


def write_gang(root: Path, ranks: int, nodes: int, steps: int) -> Path:
    """The gang's step folder; returns the last node's task folder (a worker task)."""
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._write.store.gang_markers import write_markers

    per_node = ranks // nodes
    step_dir = root / "GangFlow" / "1" / "train"
    control = LocalBackend(step_dir / "7" / "traincard")
    task = step_dir / "7"
    for node in range(nodes):
        task_id = "7" if node == 0 else f"7_node_{node}"
        task = step_dir / task_id
        write_markers(
            LocalBackend(task / "traincard"),
            control,
            {
                "node_index": node,
                "num_nodes": nodes,
                "control_task_id": "7",
                "task_id": task_id,
                "pathspec": f"GangFlow/1/train/{task_id}",
                "host": f"node{node}",
                "launcher_pid": 1,
            },
        )
        for local in range(per_node):
            _write_rank(task / "traincard", node * per_node + local, local, node, ranks, steps)
    return task


def write_single(root: Path, steps: int) -> Path:
    folder = root / "single"
    _write_rank(folder, 0, 0, 0, 1, steps)
    return folder


_MEASURE = """
import json, resource, sys, time
t0 = time.perf_counter()
import traincard_otel
from traincard_otel._read.card.render import render_data
data = traincard_otel.load(sys.argv[1])
load_s = time.perf_counter() - t0
t0 = time.perf_counter()
html = render_data(data, live=False, final=True)
render_s = time.perf_counter() - t0
gang = (data.gang or {}).get("summary") or {}
print(json.dumps({
    "load_s": load_s, "render_s": render_s, "html_bytes": len(html.encode()),
    "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "ranks": len(data.step_times), "world_size": gang.get("world_size"),
    "slowest": (gang.get("stragglers") or {}).get("slowest"),
}))
"""


def measure(target: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(target)], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="8 ranks on 2 nodes x 2000 steps (a smoke run)")
    ap.add_argument("--store", default=None, help="keep the stores here and reuse them for the same shape")
    args = ap.parse_args(argv)
    if args.quick:
        args.ranks, args.nodes, args.steps = 8, 2, 2000
    with tempfile.TemporaryDirectory() as tmp:
        shape = f"{args.ranks}x{args.nodes}x{args.steps}"
        root = Path(args.store) / shape if args.store else Path(tmp)
        done = root / "written"
        t0 = time.perf_counter()
        if done.exists():
            worker, single = Path(done.read_text()), root / "single"
        else:
            root.mkdir(parents=True, exist_ok=True)
            worker = write_gang(root, args.ranks, args.nodes, args.steps)
            single = write_single(root, args.steps)
            done.write_text(str(worker))
        write_s = time.perf_counter() - t0
        stored = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        results = {"gang": measure(worker), "single": measure(single)}
    g, s = results["gang"], results["single"]
    report = {
        "ranks": args.ranks,
        "nodes": args.nodes,
        "steps": args.steps,
        "write_s": write_s,
        "stored_bytes": stored,
        "cpus": os.cpu_count(),
        **results,
        "results": [{"case": case, **figures} for case, figures in results.items()],
        "ratios": {k: g[k] / s[k] for k in ("load_s", "render_s", "html_bytes", "max_rss_bytes")},
        "targets_met": {
            "render_s<=3": g["render_s"] <= 3,
            "html<=2MB": g["html_bytes"] <= 2e6,
            "load_s<=5": g["load_s"] <= 5,
            "memory<=1GB": g["max_rss_bytes"] <= 2**30,
        },
    }
    print(f"{'':18}{'gang':>14}{'single rank':>14}{'ratio':>8}")
    for key, unit, scale in (
        ("load_s", "s", 1),
        ("render_s", "s", 1),
        ("html_bytes", "kB", 1e-3),
        ("max_rss_bytes", "MB", 1e-6),
    ):
        print(
            f"{key:18}{g[key] * scale:>12.2f}{unit:>2}{s[key] * scale:>12.2f}{unit:>2}"
            f"{report['ratios'][key]:>8.2f}"
        )
    print(f"{args.ranks} ranks on {args.nodes} nodes x {args.steps} steps; targets: {report['targets_met']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
