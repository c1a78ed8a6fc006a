"""Shared timing helpers: interleaved A/B repetitions, medians with their spread, tables."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median and quartiles of repeated measurements."""
    ordered = sorted(values)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    return {"median": statistics.median(ordered), "p25": q[0], "p75": q[2], "n": len(ordered)}


def interleave(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run every case once per round, in ABBA order, so slow drifts of the machine cancel out."""
    names = list(cases)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            out[name].append(cases[name]())
    return out


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
    benchmark: str, rows: list[dict[str, Any]], columns: Sequence[str], json_path: str | None, **extra: Any
) -> dict[str, Any]:
    """Print the table, write the raw numbers as JSON when asked, and return them."""
    print(table(rows, columns))
    out = {"benchmark": benchmark, **extra, "results": rows}
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=2, default=str))
    return out
