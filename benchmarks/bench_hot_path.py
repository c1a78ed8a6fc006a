"""Hot path: one 8-scalar report at a new step, as the training thread sees it.

    python -m benchmarks.bench_hot_path [--quick] [--json out.json]

Compared in the same run with the floor (build and append an 8-entry dict) and, when installed
(``pip install -r benchmarks/requirements-peers.txt``), wandb offline, TensorBoard and MLflow.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._harness import interleave, report, spread

NAMES = [f"metric_{i}" for i in range(8)]


def _timed(fn: Callable[[int], None], n: int) -> Callable[[], float]:
    state = {"step": 0}

    def run() -> float:
        start = state["step"]
        t0 = time.perf_counter()
        for s in range(start, start + n):
            fn(s)
        state["step"] = start + n
        return (time.perf_counter() - t0) / n * 1e6

    return run


def _cases(tmp: str) -> dict[str, Callable[[int], None]]:
    import traincard_otel

    os.environ.setdefault("TRAINCARD_SYSTEM", "false")
    reporter = traincard_otel.configure(store=f"file://{tmp}/store")
    floor: list[Any] = []
    cases: dict[str, Callable[[int], None]] = {
        "floor: dict + list.append": lambda s: floor.append((s, {n: 0.5 for n in NAMES})),
        "traincard Reporter.metrics": lambda s: reporter.metrics({n: 0.5 for n in NAMES}, step=s),
    }
    try:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=f"{tmp}/tb")

        def tb(s: int) -> None:
            for n in NAMES:
                writer.add_scalar(n, 0.5, s)

        cases["tensorboard add_scalar x8"] = tb
    except ImportError:
        pass
    try:
        import wandb

        run = wandb.init(mode="offline", dir=tmp, project="bench")
        cases["wandb log (offline)"] = lambda s: run.log({n: 0.5 for n in NAMES}, step=s)
    except ImportError:
        pass
    try:
        import mlflow

        mlflow.set_tracking_uri(f"file://{tmp}/mlruns")
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        mlflow.start_run()
        cases["mlflow log_metrics (async)"] = lambda s: mlflow.log_metrics(
            {n: 0.5 for n in NAMES}, step=s, synchronous=False
        )
    except ImportError:
        pass
    return cases


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure µs per call for each case; returns and prints medians, spread and ratio to the floor."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    calls, rounds = (200, 2) if args.quick else (5000, 12)
    with tempfile.TemporaryDirectory() as tmp:
        cases = _cases(tmp)
        samples = interleave({name: _timed(fn, calls) for name, fn in cases.items()}, rounds)
        import traincard_otel

        traincard_otel.shutdown()
    floor = spread(samples["floor: dict + list.append"])["median"]
    rows = []
    for name, values in samples.items():
        s = spread(values)
        rows.append(
            {
                "case": name,
                "median_us": s["median"],
                "p25_us": s["p25"],
                "p75_us": s["p75"],
                "x_floor": s["median"] / floor,
            }
        )
    return report(
        "hot_path",
        rows,
        ["case", "median_us", "p25_us", "p75_us", "x_floor"],
        args.json,
        calls_per_round=calls,
        rounds=rounds,
    )


if __name__ == "__main__":
    main()
