"""A task's summary: the few figures a comparison of many runs needs, small enough to read by the
thousand (:mod:`traincard_otel._read.load.summaries` reads them beside each task's telemetry).

One JSON object (:class:`TaskSummarySection`): status, step, duration, goodput and MFU, the
hyperparameters (every ``traincard.hyperparams`` event merged, later values winning, text that
reads as a number turned back into one), the final and best value of each untagged metric, and the
main metric's curve averaged into at most :data:`CURVE_POINTS` buckets. Each process that writes
telemetry keeps one of what it saw (:mod:`.summary_stream`) and writes it as an object of its own;
:func:`merge_summaries` makes the task's of its writers' (attempts, ranks, a launcher and the
ranks it started), and :func:`task_summary` makes one from a read :class:`RunData` and its
:class:`Insights` (a store written before summaries were). Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypedDict

from .._schema import Event
from .._schema.keys import is_tagged
from .._types import JsonObject, JsonValue
from .baseline import main_metric

if TYPE_CHECKING:
    from .._data.rundata import RunData, Series
    from .analysis import Insights

SUMMARY_VERSION: Final = 2
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
    """One task (or one of its writers) as a comparison reads it. ``sweep`` places a foreach branch
    among its siblings; ``joins`` lists the branches a join step joins (pathspecs). A writer's own
    summary also names it (``attempt``, ``rank``, ``writer``) and keeps its productive seconds."""

    v: int
    pathspec: str | None
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
    attempt: int
    rank: int
    writer: str
    productive_s: float | None


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


def finite_extreme(values: Sequence[float], higher: bool) -> int | None:
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
    best_i = finite_extreme(values, higher)
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


def format_curve(points: Iterable[tuple[int | float | None, float]]) -> str:
    """(step, value) pairs as a summary's ``curve`` text (a pair whose step is no number is left out)."""
    out = []
    for step, value in points:
        if isinstance(step, (int, float)) and not isinstance(step, bool):
            out.append(f"{step if isinstance(step, int) else f'{step:.12g}'} {value:.6g}")
    return " ".join(out)


def curve(series: Series, points: int = CURVE_POINTS) -> str:
    """``series`` as at most ``points`` steps and bucket means (finite values only), in text: a
    comparison of a thousand branches parses a thousand summaries and draws a few curves, and a
    string is parsed as one value where a list of pairs makes three objects a point."""
    steps, values = series.steps, series.values
    n = len(values)
    if n == 0:
        return ""
    out: list[tuple[int | float | None, float]] = []
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
        out.append((steps[hi - 1], total / size))
    return format_curve(out)


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


#: A task's status from its writers' in the latest attempt, the first of these any of them has.
_STATUS_ORDER: Final = ("failed", "terminated", "running", "stopped_early", "finished")


def _num(value: JsonValue) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _merged_metric(name: str, entries: Sequence[tuple[JsonObject, JsonObject]]) -> MetricSummarySection:
    """One metric over the writers that report it (``entries``: (writer's summary, its metric), in
    attempt order): the last value of the latest attempt's lowest rank, the best of all."""
    higher = higher_is_better(name)
    _s, last = max(
        entries,
        key=lambda e: (_int_or_none(e[0].get("attempt")) or 0, -(_int_or_none(e[0].get("rank")) or 0)),
    )
    best: tuple[float, JsonValue] | None = None
    for _s, m in entries:
        value = _num(m.get("best"))
        if value is not None and (best is None or (value > best[0] if higher else value < best[0])):
            best = (value, m.get("best_step"))
    return {
        "last": _num(last.get("last")),
        "last_step": _int_or_none(last.get("last_step")),
        "best": best[0] if best is not None else None,
        "best_step": _int_or_none(best[1]) if best is not None else None,
        "points": sum(_int_or_none(m.get("points")) or 0 for _s, m in entries),
    }


def _merged_curve(main: str, writers: Sequence[JsonObject]) -> str:
    """The main metric's curve of each attempt in turn (its lowest rank's), thinned to
    :data:`CURVE_POINTS` by averaging neighbours."""
    by_attempt: dict[int, JsonObject] = {}
    for s in writers:
        metrics = s.get("metrics")
        if isinstance(metrics, dict) and main in metrics:
            attempt = _int_or_none(s.get("attempt")) or 0
            known = by_attempt.get(attempt)
            if known is None or (_int_or_none(s.get("rank")) or 0) < (_int_or_none(known.get("rank")) or 0):
                by_attempt[attempt] = s
    if len(by_attempt) == 1:  # one attempt's curve: as its writer wrote it
        curve = next(iter(by_attempt.values())).get("curve")
        return curve if isinstance(curve, str) else format_curve((p[0], p[1]) for p in curve_points(curve))
    points = [p for a in sorted(by_attempt) for p in curve_points(by_attempt[a].get("curve"))]
    while len(points) > CURVE_POINTS:
        points = [
            [
                points[min(k + 1, len(points) - 1)][0],
                sum(p[1] for p in points[k : k + 2]) / len(points[k : k + 2]),
            ]
            for k in range(0, len(points), 2)
        ]
    return format_curve((int(step) if step.is_integer() else step, value) for step, value in points)


def merge_summaries(summaries: Sequence[JsonObject]) -> JsonObject | None:
    """One task's summary from the summaries its writers wrote (each process, each attempt).

    The status is the latest attempt's: the first of :data:`_STATUS_ORDER` that the latest writer
    of any of its ranks has (a failed rank fails the task; a task runs while any process does);
    the step its furthest; the times span every writer. Hyperparameters merge in attempt order
    (later values win); each metric's final value is the latest attempt's (its lowest rank), its
    best the best of all; the curve is each attempt's in turn. Goodput is the share of productive
    time of the writers that timed steps (the lowest rank of each attempt) in the time from the
    first one's start to the last one's word; MFU the mean of the latest attempt's ranks. A summary
    without a writer (a store written before writers kept their own) is taken as it is.
    """
    writers = [s for s in summaries if isinstance(s.get("writer"), str)]
    if len(writers) <= 1:  # one writer's summary is the task's (so is an older store's one summary)
        return dict(writers[0] if writers else summaries[-1]) if summaries else None
    writers.sort(
        key=lambda s: (
            _int_or_none(s.get("attempt")) or 0,
            _num(s.get("started_at")) or 0.0,
            _int_or_none(s.get("rank")) or 0,
        )
    )
    latest_attempt = max(_int_or_none(s.get("attempt")) or 0 for s in writers)
    by_rank: dict[int, JsonObject] = {}
    for s in writers:  # the latest process of each rank in the latest attempt
        if (_int_or_none(s.get("attempt")) or 0) == latest_attempt:
            by_rank[_int_or_none(s.get("rank")) or 0] = s
    latest = [by_rank[r] for r in sorted(by_rank)]
    statuses = {s.get("status") for s in latest}
    steps = [step for s in latest if (step := _int_or_none(s.get("step"))) is not None]
    starts = [t for s in writers if (t := _num(s.get("started_at"))) is not None]
    updates = [t for s in writers if (t := _num(s.get("updated_at"))) is not None]
    started, updated = (min(starts) if starts else None), (max(updates) if updates else None)
    hyperparameters: dict[str, JsonValue] = {}
    entries: dict[str, list[tuple[JsonObject, JsonObject]]] = {}
    for s in writers:
        hp, metrics = s.get("hyperparameters"), s.get("metrics")
        hyperparameters.update(hp if isinstance(hp, dict) else {})
        for name, m in metrics.items() if isinstance(metrics, dict) else []:
            if isinstance(m, dict):
                entries.setdefault(name, []).append((s, m))
    names = sorted(entries)[:MAX_METRICS]
    main = main_metric(names) or (names[0] if names else None)
    timed: dict[int, JsonObject] = {}  # attempt -> its lowest rank that timed steps
    for s in writers:
        attempt, rank = _int_or_none(s.get("attempt")) or 0, _int_or_none(s.get("rank")) or 0
        if _num(s.get("goodput")) is not None and (
            attempt not in timed or rank < (_int_or_none(timed[attempt].get("rank")) or 0)
        ):
            timed[attempt] = s
    goodput = None
    if len(timed) == 1:
        goodput = _num(next(iter(timed.values())).get("goodput"))
    elif timed:
        wall = max(_num(s.get("updated_at")) or 0.0 for s in timed.values()) - min(
            _num(s.get("started_at")) or 0.0 for s in timed.values()
        )
        productive = sum(_num(s.get("productive_s")) or 0.0 for s in timed.values())
        goodput = productive / wall if wall > 0 else None
    mfus = [m for s in latest if (m := _num(s.get("mfu"))) is not None]
    return {
        "v": SUMMARY_VERSION,
        "pathspec": next((p for s in writers if isinstance(p := s.get("pathspec"), str) and p), None),
        "status": next((k for k in _STATUS_ORDER if k in statuses), None)
        or next((str(k) for k in statuses if isinstance(k, str)), None),
        "step": max(steps) if steps else None,
        "started_at": started,
        "updated_at": updated,
        "duration_s": updated - started if started is not None and updated is not None else None,
        "goodput": goodput,
        "mfu": sum(mfus) / len(mfus) if mfus else None,
        "hyperparameters": hyperparameters,
        "metrics": {name: dict(_merged_metric(name, entries[name])) for name in names},
        "main": main,
        "higher_is_better": higher_is_better(main) if main else False,
        "curve": _merged_curve(main, writers) if main else "",
        "failure": next((f for s in latest if isinstance(f := s.get("failure"), str)), None),
        "sweep": next((w for s in writers if isinstance(w := s.get("sweep"), dict)), None),
        "joins": next((j for s in writers if isinstance(j := s.get("joins"), list) and j), []),
    }
