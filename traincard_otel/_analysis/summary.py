"""A task's summary: the few figures a comparison of many runs needs, small enough to read by the
thousand (each task writes it next to its telemetry; :mod:`traincard_otel._read.load.summaries`).

One JSON object per task (:class:`TaskSummarySection`): status, step, duration, goodput and MFU, the
hyperparameters (every ``traincard.hyperparams`` event merged, later values winning, text that
reads as a number turned back into one), the final and best value of each untagged metric, and the
main metric's curve averaged into at most :data:`CURVE_POINTS` buckets. Pure: computed from a read
:class:`RunData` and its :class:`Insights`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypedDict

from .._schema import Event
from .._schema.keys import is_tagged
from .._types import JsonObject, JsonValue
from .baseline import main_metric

if TYPE_CHECKING:
    from .._data.rundata import RunData, Series
    from .analysis import Insights

SUMMARY_VERSION: Final = 1
CURVE_POINTS: Final = 64
MAX_METRICS: Final = 64  # a run logging hundreds of scalars keeps its first 64 names (by name)
# Metrics where a higher value is better; every other metric (a loss, a perplexity) is better lower.
_HIGHER: Final = re.compile(r"acc|f1|precision|recall|auc|bleu|rouge|score|reward|map\b|iou|exact", re.I)
_NUMBER: Final = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

Hyperparameter = str | int | float | bool | None


class MetricSummarySection(TypedDict):
    """One metric's final and best values (``best`` by :func:`higher_is_better`)."""

    last: float | None
    last_step: int | None
    best: float | None
    best_step: int | None
    points: int


class TaskSummarySection(TypedDict, total=False):
    """``summary.json``: one task as a comparison reads it. ``sweep`` places a foreach branch among
    its siblings; ``joins`` lists the branches a join step joins (pathspecs)."""

    v: int
    pathspec: str
    status: str | None
    step: int | None
    started_at: float | None
    updated_at: float | None
    duration_s: float | None
    goodput: float | None
    mfu: float | None
    hyperparameters: dict[str, Hyperparameter]
    metrics: dict[str, MetricSummarySection]
    main: str | None
    higher_is_better: bool
    curve: str  # the main metric: "step value step value ..." (:func:`curve_points` reads it)
    failure: str | None
    sweep: JsonObject | None
    joins: list[str]


def higher_is_better(name: str) -> bool:
    """Whether a higher value of metric ``name`` is better (accuracy, F1, a score, a reward)."""
    return bool(_HIGHER.search(name)) and "loss" not in name.lower()


def hyperparameter_value(value: JsonValue) -> Hyperparameter:
    """A reported hyperparameter as a comparison shows it: text that reads as a number is one."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    if _NUMBER.match(text):
        number = float(text)
        if re.match(r"^[-+]?\d+$", text) and abs(number) < 2**53:
            return int(text)
        return number if math.isfinite(number) else text
    if text in ("True", "False"):
        return text == "True"
    return text


def hyperparameters(data: RunData) -> dict[str, Hyperparameter]:
    """Every ``traincard.hyperparams`` event of ``data`` merged, the later value of a name winning."""
    out: dict[str, Hyperparameter] = {}
    for event in sorted(
        (e for e in data.events if e.get("name") == Event.HYPERPARAMS),
        key=lambda e: float(e.get("time") or 0.0),
    ):
        body = event.get("body")
        if isinstance(body, Mapping):
            for key, value in body.items():
                out[str(key)] = hyperparameter_value(value)
    return out


def _finite_extreme(values: Sequence[float], higher: bool) -> int | None:
    """The index of the best finite value (the first one of equals), or None."""
    try:
        best = max(values) if higher else min(values)  # C speed; a NaN may hide the real extreme
    except ValueError:
        return None
    if math.isfinite(best):
        return values.index(best)
    finite = [(v, i) for i, v in enumerate(values) if math.isfinite(v)]
    if not finite:
        return None
    return (max if higher else min)(finite, key=lambda p: (p[0], -p[1]) if higher else (p[0], p[1]))[1]


def _int_or_none(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def metric_summary(series: Series, higher: bool) -> MetricSummarySection:
    """``series``' last value and its best (highest when ``higher``), with their steps."""
    values = series.values
    n = len(values)
    last_i = next((i for i in range(n - 1, -1, -1) if math.isfinite(values[i])), None)
    best_i = _finite_extreme(values, higher)
    return {
        "last": float(values[last_i]) if last_i is not None else None,
        "last_step": _int_or_none(series.steps[last_i]) if last_i is not None else None,
        "best": float(values[best_i]) if best_i is not None else None,
        "best_step": _int_or_none(series.steps[best_i]) if best_i is not None else None,
        "points": n,
    }


def curve_points(text: object) -> list[list[float]]:
    """A summary's ``curve`` as [step, value] pairs (a list of pairs is taken as it is)."""
    if isinstance(text, list):
        return [[float(p[0]), float(p[1])] for p in text if isinstance(p, list) and len(p) == 2]
    if not isinstance(text, str):
        return []
    numbers = [float(n) for n in text.split()]
    return [[numbers[i], numbers[i + 1]] for i in range(0, len(numbers) - 1, 2)]


def curve(series: Series, points: int = CURVE_POINTS) -> str:
    """``series`` as at most ``points`` steps and bucket means (finite values only), in text: a
    comparison of a thousand branches parses a thousand summaries and draws a few curves, and a
    string is parsed as one value where a list of pairs makes three objects a point."""
    steps, values = series.steps, series.values
    n = len(values)
    if n == 0:
        return ""
    out: list[str] = []
    buckets = min(points, n)
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        chunk = values[lo:hi]
        total = sum(chunk)
        if not math.isfinite(total):
            finite = [v for v in chunk if math.isfinite(v)]
            if not finite:
                continue
            total, size = sum(finite), len(finite)
        else:
            size = len(chunk)
        step = steps[hi - 1]
        if isinstance(step, (int, float)) and not isinstance(step, bool):
            out.append(f"{step if isinstance(step, int) else f'{step:.12g}'} {total / size:.6g}")
    return " ".join(out)


def _status_time(states: Sequence[Mapping[str, JsonValue]], key: str, pick: str) -> float | None:
    found = [
        float(v) for s in states if isinstance(v := s.get(key), (int, float)) and not isinstance(v, bool)
    ]
    if not found:
        return None
    return min(found) if pick == "min" else max(found)


def task_summary(
    data: RunData,
    insights: Insights | None,
    *,
    pathspec: str | None = None,
    sweep: JsonObject | None = None,
    joins: Sequence[str] = (),
) -> TaskSummarySection:
    """The summary of the task that recorded ``data`` (analysed as ``insights``)."""
    status = data.status
    names = sorted(k for k in data.metrics if not is_tagged(k) and len(data.metrics[k]))[:MAX_METRICS]
    main = main_metric(names) or (names[0] if names else None)
    metrics = {k: metric_summary(data.metrics[k], higher_is_better(k)) for k in names}
    started = _status_time(data.states, "started_at", "min")
    updated = _status_time(data.states, "heartbeat_at", "max") or _status_time(
        data.states, "updated_at", "max"
    )
    goodput = insights.goodput if insights is not None else None
    efficiency = insights.efficiency if insights is not None else None
    failure = status.get("failure")
    failure_text = None
    if isinstance(failure, Mapping):
        failure_text = f"{failure.get('type') or 'error'}: {failure.get('message') or ''}".strip()[:300]
    step = status.get("step")
    return {
        "v": SUMMARY_VERSION,
        "pathspec": pathspec or data.source,
        "status": str(status["status"]) if status.get("status") is not None else None,
        "step": _int_or_none(step),
        "started_at": started,
        "updated_at": updated,
        "duration_s": (updated - started) if started is not None and updated is not None else None,
        "goodput": goodput.ratio if goodput is not None else None,
        "mfu": efficiency.mfu if efficiency is not None else None,
        "hyperparameters": hyperparameters(data),
        "metrics": metrics,
        "main": main,
        "higher_is_better": higher_is_better(main) if main else False,
        "curve": curve(data.metrics[main]) if main else "",
        "failure": failure_text,
        "sweep": sweep,
        "joins": list(joins),
    }
