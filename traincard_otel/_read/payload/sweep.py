"""The Sweep section (``payload["sweep"]``): the branches of a foreach (or several runs) side by side,
from their summaries (:mod:`traincard_otel._analysis.summary`), never from their telemetry.

Hyperparameters with the same value in every branch are folded into ``constant``; the ones that
vary come first, most distinct values first (:func:`fold`). Rows are ordered best first by the main
metric; the best branch is marked. A live payload keeps the best :data:`LIVE_ROWS` rows (and this
task's own) and the curves of the best :data:`LIVE_CURVES`; ``hidden`` counts what it left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from ..._analysis.summary import Hyperparameter, curve_points
from ..._types import JsonObject, JsonValue
from .contract import SweepCurveRow, SweepRow, SweepSection

LIVE_ROWS: Final = 40
LIVE_CURVES: Final = 8
LIVE_CURVE_POINTS: Final = 32
FULL_CURVE_POINTS: Final = 64
MANY_CURVE_POINTS: Final = 24  # a full card of more than MANY_BRANCHES branches
MANY_BRANCHES: Final = 100


def _key(value: Hyperparameter) -> str:
    return repr(value)


def fold(
    hyperparameters: Sequence[Mapping[str, Hyperparameter]],
) -> tuple[list[str], dict[str, Hyperparameter]]:
    """(the names whose value differs between branches, most distinct values first then by name;
    the names with one value in every branch, with it). A name some branch lacks varies."""
    names = sorted({k for hp in hyperparameters for k in hp})
    distinct: dict[str, int] = {}
    constant: dict[str, Hyperparameter] = {}
    for name in names:
        seen = {_key(hp.get(name)) if name in hp else "<missing>" for hp in hyperparameters}
        if len(seen) == 1 and len(hyperparameters) > 1:
            constant[name] = hyperparameters[0][name]
        else:
            distinct[name] = len(seen)
    varying = sorted(distinct, key=lambda n: (-distinct[n], n))
    return varying, constant


def _num(value: JsonValue) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _main_metric(summaries: Sequence[JsonObject]) -> tuple[str | None, bool]:
    """The main metric most branches report, and whether higher is better for it."""
    counts: dict[str, int] = {}
    higher: dict[str, bool] = {}
    for s in summaries:
        main = s.get("main")
        if isinstance(main, str):
            counts[main] = counts.get(main, 0) + 1
            higher[main] = bool(s.get("higher_is_better"))
    if not counts:
        return None, False
    main = max(sorted(counts), key=lambda k: counts[k])
    return main, higher[main]


def _thin(curve: JsonValue, keep: int) -> list[list[float]]:
    pairs = [p for p in curve_points(curve) if math.isfinite(p[0]) and math.isfinite(p[1])]
    if len(pairs) > keep:
        pairs = [pairs[i * len(pairs) // keep] for i in range(keep - 1)] + [pairs[-1]]
    return pairs


def _row(task_id: str, s: JsonObject, metric: str | None, own: str | None) -> SweepRow:
    metrics = s.get("metrics")
    m = metrics.get(metric) if isinstance(metrics, dict) and metric else None
    m = m if isinstance(m, dict) else {}
    hp = s.get("hyperparameters")
    step = s.get("step")
    return {
        "id": task_id,
        "pathspec": str(s.get("pathspec") or task_id),
        "status": str(s.get("status") or "unknown"),
        "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
        "hp": dict(hp) if isinstance(hp, dict) else {},
        "latest": _num(m.get("last")),
        "best": _num(m.get("best")),
        "best_step": _num(m.get("best_step")),
        "duration_s": _num(s.get("duration_s")),
        "goodput": _num(s.get("goodput")),
        "mfu": _num(s.get("mfu")),
        "failure": str(s["failure"]) if s.get("failure") else None,
        "self": own is not None and (task_id == own or s.get("pathspec") == own),
        "is_best": False,
    }


def sweep_section(
    summaries: Mapping[str, JsonObject],
    *,
    title: str,
    own: str | None = None,
    live: bool = False,
    standalone: bool = False,
    notes: Sequence[str] = (),
) -> SweepSection:
    """The ``sweep`` object of the payload for the branches ``summaries`` (task id -> summary);
    ``own`` is this task's id or pathspec (its row is marked and always kept)."""
    items = sorted(summaries.items())
    metric, higher = _main_metric([s for _, s in items])
    rows = [_row(tid, s, metric, own) for tid, s in items]
    sign = -1.0 if higher else 1.0
    rows.sort(key=lambda r: (r["best"] is None, sign * r["best"] if r["best"] is not None else 0.0, r["id"]))
    best = rows[0]["id"] if rows and rows[0]["best"] is not None else None
    if best is not None:
        rows[0]["is_best"] = True
    varying, constant = fold([r["hp"] for r in rows])
    total = len(rows)
    if live and total > LIVE_ROWS:
        kept = rows[:LIVE_ROWS]
        kept += [r for r in rows[LIVE_ROWS:] if r["self"]]
        rows = kept
    by_id = dict(items)
    with_curve = [r for r in rows if by_id[r["id"]].get("curve")]
    if live:
        with_curve = with_curve[:LIVE_CURVES] + [r for r in with_curve[LIVE_CURVES:] if r["self"]]
    points = LIVE_CURVE_POINTS if live else FULL_CURVE_POINTS if total <= MANY_BRANCHES else MANY_CURVE_POINTS
    curves: list[SweepCurveRow] = []
    for r in with_curve:
        curves.append(
            {
                "id": r["id"],
                "points": _thin(by_id[r["id"]].get("curve"), points),
                "best": r["is_best"],
                "self": r["self"],
            }
        )
    with_any_curve = sum(1 for _, s in items if s.get("curve"))
    for r in rows:  # the folded names are said once, above the table
        r["hp"] = {k: v for k, v in r["hp"].items() if k not in constant}
    return {
        "title": title,
        "metric": metric,
        "higher_is_better": higher,
        "varying": varying,
        "constant": constant,
        "rows": rows,
        "curves": curves,
        "best": best,
        "total": total,
        "hidden_rows": total - len(rows),
        "hidden_curves": with_any_curve - len(curves),
        "standalone": standalone,
        "notes": list(notes),
    }
