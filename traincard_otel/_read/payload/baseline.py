"""The baseline section (``payload["baseline"]``): an earlier run's curves to overlay, and where this
run stands against it.

``series``: the baseline's training loss and eval metrics, each tagged with the chart it joins
(the chart ids of :func:`.training.chart_name`), decimated to what a chart can show (min and max
per bucket, :data:`FULL_POINTS` in a full payload, :data:`LIVE_POINTS` in a live one) with values
rounded to 6 significant digits. A baseline is a finished run: its decimated series are computed
once per baseline and kept. ``status``: the comparison at this run's latest step
(:func:`traincard_otel._analysis.baseline.compare`), one entry per figure. ``note``: why there is
no baseline to show (none found, or it could not be read), shown quietly in the status bar.
"""

from __future__ import annotations

import math
import threading
from typing import Final

from ..._analysis.baseline import Baseline, Comparison, main_metric
from ..._data.rundata import RunData, Series
from ..._schema.keys import is_tagged
from .contract import BaselineSection
from .series import Mode, downsample
from .training import chart_name

FULL_POINTS: Final = 400
LIVE_POINTS: Final = 120
MAX_SERIES: Final = 8

_cache: dict[tuple[int, str, int], tuple[Series, list[float], list[float | None]]] = {}
_lock = threading.Lock()


def _round(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(f"{v:.6g}")


def _decimated(series: Series, points: int) -> tuple[list[float], list[float | None]]:
    key = (id(series), series.name, points)
    with _lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] is series:
        return hit[1], hit[2]
    pairs = sorted(
        ((float(s), v) for s, v in zip(series.steps, series.values, strict=False) if isinstance(s, int)),
        key=lambda p: p[0],
    )
    xs, ys = downsample([p[0] for p in pairs], [p[1] for p in pairs], max_points=points)
    out_y = [_round(y) for y in ys]
    with _lock:
        if len(_cache) > 64:
            _cache.clear()
        _cache[key] = (series, xs, out_y)
    return xs, out_y


def _overlaid(data: RunData, base: RunData) -> list[str]:
    """The baseline's metric keys to overlay: the training loss, then its eval metrics."""
    main = main_metric(data.metrics) or main_metric(base.metrics)
    keys = [main] if main in base.metrics else []
    keys += sorted(k for k in base.metrics if k.startswith("eval_") and not is_tagged(k))
    return [k for k in keys if k is not None][:MAX_SERIES]


def baseline_section(
    data: RunData, baseline: Baseline | None, mode: Mode, comparison: Comparison | None
) -> BaselineSection | None:
    """The ``baseline`` object of the payload (``docs/card-payload.md``); None without a baseline.
    ``comparison`` is the analysis's (:func:`traincard_otel._analysis.analysis.analyse`)."""
    if baseline is None:
        return None
    out: BaselineSection = {
        "label": baseline.label,
        "run_id": baseline.run_id,
        "name": baseline.short,
        "note": baseline.note,
        "notes": [],
        "series": [],
        "status": [],
    }
    base = baseline.data
    if base is None or comparison is None:
        return out
    points = LIVE_POINTS if mode.live else FULL_POINTS
    for key in _overlaid(data, base):
        chart, role = chart_name(key)
        xs, ys = _decimated(base.metrics[key], points)
        if xs:
            out["series"].append(
                {"chart": chart, "role": role, "label": f"{role} \u00b7 {baseline.short}", "x": xs, "y": ys}
            )
    for kind, figure in (("metric", comparison.metric), ("step_time", comparison.step_time)):
        if figure is not None:
            out["status"].append(
                {
                    "kind": kind,
                    "name": figure.name,
                    "step": figure.step,
                    "verdict": figure.verdict,
                    "value": figure.value,
                    "baseline": figure.baseline,
                    "relative": figure.relative if math.isfinite(figure.relative) else None,
                    "text": figure.text,
                }
            )
    out["notes"] = list(comparison.notes)
    return out
