"""Shared timing helpers: interleaved A/B repetitions, medians with their spread, tables."""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


# The tracker's timers that fire by wall time (the store's flush with the converter's drain, the
# system sample), with their defaults: designs that run a process only part of the wall time
# scale them to its share, so that they fire at their default rate per second of its running time.
TIMERS = {"TRAINCARD_FLUSH_INTERVAL": 2.0, "TRAINCARD_SYSTEM_INTERVAL": 2.0}


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median and quartiles of repeated measurements."""
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) >= 2 else [ordered[0]] * 3
    return {"median": statistics.median(ordered), "p25": q[0], "p75": q[2], "n": len(ordered)}


def median_interval(
    groups: Sequence[Sequence[float]], level: float = 0.95, resamples: int = 2000
) -> tuple[float, float]:
    """Bootstrap interval of the median of all values: :func:`bootstrap_interval` of the median."""
    return bootstrap_interval(groups, statistics.median, level, resamples)


def bootstrap_interval(
    groups: Sequence[Sequence[T]],
    statistic: Callable[[list[T]], float],
    level: float = 0.95,
    resamples: int = 2000,
) -> tuple[float, float]:
    """Bootstrap interval of ``statistic`` over all items (percentile method, fixed seed).

    Items come in groups whose members may share an error (the run pairs of one process): each
    resample draws groups with replacement, then items within each drawn group, so the interval
    widens by as much as groups differ. With one group it is the ordinary bootstrap.
    """
    rng = random.Random(0)
    figures = []
    for _ in range(resamples):
        drawn = [v for group in rng.choices(groups, k=len(groups)) for v in rng.choices(group, k=len(group))]
        figures.append(statistic(drawn))
    figures.sort()
    tail = (1 - level) / 2
    return figures[int(tail * resamples)], figures[int((1 - tail) * resamples) - 1]


def interleave(
    cases: dict[str, Callable[[], float]], rounds: int, *, between: Callable[[], object] | None = None
) -> dict[str, list[float]]:
    """Run every case once per round, in ABBA order, so slow drifts of the machine cancel out.

    ``between`` runs after each case (e.g. a :func:`settler`), untimed.
    """
    names = list(cases)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            out[name].append(cases[name]())
            if between is not None:
                between()
    return out


def settler(max_s: float = 20.0, quiet_fraction: float = 0.05, window_s: float = 0.2) -> Callable[[], float]:
    """A function that waits until this process's other threads, and the child processes started
    since this call, use under ``quiet_fraction`` of a core (at most ``max_s``); it returns the
    seconds waited.

    Trackers hand work to background threads and processes (wandb's service, MLflow's async queue);
    without this, their backlog would run during the next case and be charged to it. Children that
    already exist (a browser a test suite keeps open) are not watched.
    """
    import psutil

    me = psutil.Process()
    existing = {child.pid for child in me.children(recursive=True)}

    def settle() -> float:
        children = [c for c in me.children(recursive=True) if c.pid not in existing]

        def cpu() -> float:
            # This process's other threads (the waiting thread's own polling excluded) and children.
            total = time.process_time() - time.thread_time()
            for child in children:
                with contextlib.suppress(psutil.Error):
                    total += sum(child.cpu_times()[:2])
            return total

        start = time.monotonic()
        before = cpu()
        while time.monotonic() - start < max_s:
            time.sleep(window_s)
            now = cpu()
            if now - before < quiet_fraction * window_s:
                break
            before = now
        return time.monotonic() - start

    return settle


def table(rows: list[dict[str, object]], columns: Sequence[str]) -> str:
    widths = [max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(_fmt(r.get(c)).rjust(w) for c, w in zip(columns, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return "" if v is None else str(v)


def report(
    benchmark: str,
    rows: list[dict[str, Any]],
    columns: Sequence[str] | None,
    json_path: str | None,
    **extra: Any,
) -> dict[str, Any]:
    """Print the table, write the raw numbers as JSON when asked, and return them.

    ``columns`` None: every figure of the rows, in the order the first row names them."""
    print(table(rows, list(rows[0]) if columns is None and rows else columns or []))
    out = {"benchmark": benchmark, **extra, "results": rows}
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=2, default=str))
    return out
