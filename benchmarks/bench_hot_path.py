"""Hot path: one 8-scalar report at a new step, and one step end, as the training thread sees them.

    python -m benchmarks.bench_hot_path [--quick] [--json out.json]

Compared in the same run with the floor (build and append an 8-entry dict), the same report with
the NaN check that ``stop_on="nan"`` arms and, when installed (``pip install -e '.[bench]'``),
wandb offline, TensorBoard and MLflow.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._harness import interleave, report, settler, spread

NAMES = [f"metric_{i}" for i in range(8)]
FLOOR = "floor: dict + list.append"
# A case runs at most this long per round: a peer at milliseconds per call needs far fewer calls
# than the microsecond cases for a stable median, and its background backlog stays drainable.
ROUND_BUDGET_S = 0.25
WARM_UP_CALLS = 20
Call = Callable[[int], object]


def _timed(fn: Call, n: int) -> Callable[[], float]:
    state = {"step": WARM_UP_CALLS}  # steps keep increasing after the warm-up (wandb requires it)

    def run() -> float:
        start = state["step"]
        t0 = time.perf_counter()
        for s in range(start, start + n):
            fn(s)
        state["step"] = start + n
        return (time.perf_counter() - t0) / n * 1e6

    return run


def _calls_per_round(call: Call, most: int, settle: Callable[[], object]) -> int:
    """Warm the case up (first calls create files, threads and caches) and size its rounds."""
    t0 = time.perf_counter()
    for s in range(WARM_UP_CALLS):
        call(s)
    per_call = (time.perf_counter() - t0) / WARM_UP_CALLS
    settle()
    return max(5, min(most, int(ROUND_BUDGET_S / per_call)))


def _peers(tmp: str, stack: contextlib.ExitStack) -> dict[str, Call]:
    """The trackers people use, each configured as its docs suggest for local runs."""
    cases: dict[str, Call] = {}
    try:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=f"{tmp}/tb")
        stack.callback(writer.close)

        def tb(s: int) -> None:
            for n in NAMES:
                writer.add_scalar(n, 0.5, s)

        cases["tensorboard add_scalar x8"] = tb
    except ImportError:
        pass
    try:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        run = wandb.init(mode="offline", dir=tmp, project="bench")
        stack.callback(run.finish)
        cases["wandb log (offline)"] = lambda s: run.log({n: 0.5 for n in NAMES}, step=s)
    except ImportError:
        pass
    try:
        import mlflow

        # MLflow's default store (a SQLite file in the working directory), placed in tmp.
        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        mlflow.start_run()
        stack.callback(mlflow.end_run)
        cases["mlflow log_metrics (async)"] = lambda s: mlflow.log_metrics(
            {n: 0.5 for n in NAMES}, step=s, synchronous=False
        )
        cases["mlflow log_metrics (default, sync)"] = lambda s: mlflow.log_metrics(
            {n: 0.5 for n in NAMES}, step=s
        )
    except ImportError:
        pass
    return cases


def _cases(tmp: str, stack: contextlib.ExitStack, *, peers: bool) -> dict[str, Call]:
    import traincard_otel

    os.environ.setdefault("TRAINCARD_SYSTEM", "false")
    reporter = traincard_otel.configure(store=f"file://{tmp}/store")
    stack.callback(traincard_otel.shutdown)
    # One pipeline per process: a reporter of the same one, with the check stop_on="nan" arms.
    armed = traincard_otel.Reporter._bound(reporter._pipeline)
    armed._nonfinite = armed._guards
    floor: list[Any] = []
    return {
        FLOOR: lambda s: floor.append((s, {n: 0.5 for n in NAMES})),
        "traincard Reporter.metrics": lambda s: reporter.metrics({n: 0.5 for n in NAMES}, step=s),
        "traincard Reporter.metrics, stop_on=nan": lambda s: armed.metrics({n: 0.5 for n in NAMES}, step=s),
        # a raw loop's step end (the reporter times the step) and an adapter's (it passes its own)
        "traincard Reporter.step_end(step)": lambda s: reporter.step_end(s),
        "traincard Reporter.step_end(step, duration_s)": lambda s: reporter.step_end(s, 0.01),
        **(_peers(tmp, stack) if peers else {}),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure µs per call for each case; returns and prints medians, spread and ratio to the floor."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-peers", action="store_true", help="skip TensorBoard, wandb and MLflow")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    calls, rounds = (200, 2) if args.quick else (5000, 12)
    settle = settler(max_s=0.2, window_s=0.05) if args.quick else settler(max_s=20.0)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        cases = _cases(tmp, stack, peers=not args.no_peers)
        timers = {name: _timed(call, _calls_per_round(call, calls, settle)) for name, call in cases.items()}
        samples = interleave(timers, rounds, between=settle)
    floor = spread(samples[FLOOR])["median"]
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
