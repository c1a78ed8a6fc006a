"""Records added to a :class:`~traincard_otel._data.rundata.RunData`, one at a time or a packed
run of metric rows or step ends a column at a time (what a segment holds, decoded by
:mod:`traincard_otel._store.segment`).

Metric and per-rank series (step time, throughput, data wait) are compact typed columns; a packed
run is added a column at a time (a step-end run, when whole: every step timed, every count set),
without a Python object per value.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import MutableSequence, Sequence

from ..._data.anatomy import StepParts
from ..._data.completions import rows_of
from ..._data.rundata import DATA_WAIT_TAIL, MAX_GENAI_SPANS, Record, RunData, Series
from ..._schema import Attr, Event
from ..._schema.keys import series_key
from ..._store.segment import PACKED_LINES, line_columns
from ..._types import JsonObject, JsonValue
from .columns import FLOAT, INT, SMALL, Column, extend, own, rank_series, repeat, typed_series


def _no_gaps(column: Sequence[JsonValue]) -> bool:
    """Whether every value of a float column is set and non-zero (C-speed scans; a false "no" only
    sends the caller down the per-value path)."""
    if 0.0 in column:
        return False
    total = sum(column)
    return bool(total == total)  # NaN anywhere makes the sum NaN


def _all_nan(column: object) -> bool:
    """Whether a float array holds only the writer's NaN (no value recorded), compared as bytes."""
    return (
        isinstance(column, array) and column.tobytes() == (array(FLOAT, [math.nan]) * len(column)).tobytes()
    )


def add_metric_columns(data: RunData, rec: Record, attempt: int, rank: int) -> int:
    """A packed run of metric rows (:func:`~.segment.metric_columns`), one column slice per
    name (values are row-major: a name's values are every ``len(names)``-th); returns its rows."""
    names, t, v, tags = rec["n"], rec["t"], rec["v"], rec.get("g")
    steps = extend(Column(INT), rec["s"])  # packed once for every name
    width = len(names)
    for i, name in enumerate(names):
        key = series_key(name, tags)
        series = data.metrics.get(key)
        if series is None:
            series = data.metrics[key] = typed_series(name, tags)
        extend_series(series, steps, v[i::width], t, attempt, rank)
    return len(rec["s"])


def add_step_columns(data: RunData, rec: Record, attempt: int, rank: int) -> int:
    """A packed run of step ends, as :func:`_add` adds each of its rows; returns its row count.

    A run is usually whole (every step timed, every count set): then columns are added as they
    are, without a Python object per value.
    """
    s, t, d, w, n, tok = rec["s"], rec["t"], rec["d"], rec["w"], rec["n"], rec["tok"]
    if "a" in rec:
        add_anatomy(data, rank, s, t, d, rec["a"], attempt)
    whole = _no_gaps(d)
    keep = range(len(s)) if whole else [i for i, x in enumerate(d) if x == x and x]
    if not keep:  # a step end without a duration adds no point
        return len(s)
    ss = s if whole else [s[i] for i in keep]
    tt = t if whole else [t[i] for i in keep]
    dd = d if whole else [d[i] for i in keep]
    series = data.step_times.get(rank)
    if series is None:
        series = data.step_times[rank] = rank_series("step_time", rank)
    extend_series(series, ss, dd, tt, attempt, rank)
    if not _all_nan(w):
        if whole and _no_gaps(w):
            waited_s = float(sum(w))
            cut = slice(-DATA_WAIT_TAIL, None)
            tail_s, tail_w, tail_t = ss[cut], w[cut], tt[cut]
        else:
            waited = [j for j, i in enumerate(keep) if w[i] == w[i]]
            waited_s, tail = sum(w[keep[j]] for j in waited), waited[-DATA_WAIT_TAIL:]
            tail_s, tail_w, tail_t = [ss[j] for j in tail], [w[keep[j]] for j in tail], [tt[j] for j in tail]
        if len(tail_s):
            data.data_wait_total[rank] = data.data_wait_total.get(rank, 0.0) + waited_s
            waits = data.data_wait.get(rank)
            if waits is None:
                waits = data.data_wait[rank] = rank_series("data_wait", rank)
            extend_series(waits, tail_s, tail_w, tail_t, attempt, rank)
            trim(waits)
    for column, tname in ((n, "samples_per_second"), (tok, "tokens_per_second")):
        if not any(column):
            continue
        if whole and 0 not in column and None not in column:
            counted_steps, counted_times = ss, tt
            rates: Sequence[float] = array(FLOAT, map(operator.truediv, column, dd))
        else:
            counted = [j for j, i in enumerate(keep) if column[i]]
            if not counted:
                continue
            counted_steps, counted_times = [ss[j] for j in counted], [tt[j] for j in counted]
            rates = [column[keep[j]] / dd[j] for j in counted]
        key = f"{tname}{{rank={rank}}}"
        tput = data.throughput.get(key)
        if tput is None:
            tput = data.throughput[key] = rank_series(tname, rank)
        extend_series(tput, counted_steps, rates, counted_times, attempt, rank)
    return len(s)


def add_anatomy(
    data: RunData,
    rank: int,
    steps: Sequence[JsonValue],
    times: Sequence[float],
    durations: Sequence[float],
    parts: Sequence[float],
    attempt: int,
) -> None:
    """Steps' anatomy (``parts`` row-major) into the rank's bounded :class:`StepParts`."""
    anatomy = data.anatomy.get(rank)
    if anatomy is None:
        anatomy = data.anatomy[rank] = StepParts()
    anatomy.add(steps, times, durations, parts, attempt)


def trim(series: Series, keep: int = DATA_WAIT_TAIL) -> None:
    """Keep only the last ``keep`` points of ``series``."""
    cut = len(series.values) - keep
    if cut > 0:
        for column in (series.steps, series.values, series.times, series.attempts, series.ranks):
            del column[:cut]


def extend_series(
    series: Series,
    steps: Sequence[JsonValue],
    values: Sequence[JsonValue],
    times: Sequence[JsonValue],
    attempt: int,
    rank: int,
) -> None:
    n = len(values)
    series.steps = extend(series.steps, steps)
    if not isinstance(values, array) and None in values:  # the per-value rewrite only where one is missing
        values = [float("nan") if v is None else v for v in values]
    series.values = extend(series.values, values)
    series.times = extend(series.times, times)
    typed = isinstance(series.attempts, array)
    series.attempts = extend(series.attempts, repeat(SMALL, attempt, n) if typed else [attempt] * n)
    series.ranks = extend(series.ranks, repeat(SMALL, rank, n) if typed else [rank] * n)


def _push(col: MutableSequence[JsonValue], item: JsonValue) -> MutableSequence[JsonValue]:
    """``col`` with ``item`` appended; a typed column that cannot take it becomes a list."""
    col = own(col)
    try:
        col.append(item)
    except (TypeError, OverflowError):
        col = [*col, item]
    return col


def _append(series: Series, step: JsonValue, value: JsonValue, t: float, attempt: int, rank: int) -> None:
    series.steps = _push(series.steps, step)
    series.values = _push(series.values, float("nan") if value is None else value)
    series.times = _push(series.times, t)
    series.attempts = _push(series.attempts, attempt)
    series.ranks = _push(series.ranks, rank)


def _add_row(metrics: dict[str, Series], rec: Record, t: float, attempt: int, rank: int) -> None:
    """One metric row (stores written before rows were packed; packed runs go a column at a time)."""
    tags = rec.get("g")
    step = rec.get("s")
    for name, value in (rec.get("v") or {}).items():
        key = series_key(name, tags)
        series = metrics.get(key)
        if series is None:
            series = metrics[key] = typed_series(name, tags)
        _append(series, step, value, t, attempt, rank)


def add_log_lines(data: RunData, rec: Record, attempt: int, rank: int) -> int:
    """A packed run of log lines (:func:`~traincard_otel._store.segment.line_columns`), one log
    entry a line; returns how many."""
    attrs: JsonObject = rec["a"]
    tracebacks: dict[str, str] = rec.get("tb") or {}
    for i, (t, level, text) in enumerate(zip(rec["t"], rec["lvl"], rec["msg"], strict=True)):
        traceback = tracebacks.get(str(i))
        data.logs.append(
            {
                "time": t,
                "level": level,
                "message": text,
                "traceback": traceback,
                "attributes": attrs if traceback is None else {**attrs, Attr.EXCEPTION_STACKTRACE: traceback},
                "attempt": attempt,
                "rank": rank,
            }
        )
    return len(rec["msg"])


def add_record(data: RunData, rec: Record, attempt: int, rank: int) -> None:
    if rec.get("k") == PACKED_LINES:  # a run of lines a part kept whole (its times in base64)
        try:
            add_log_lines(data, line_columns(rec), attempt, rank)
        except (ValueError, TypeError, KeyError):
            data.stats["corrupt_line_runs"] = int(data.stats.get("corrupt_line_runs", 0)) + 1
        return
    kind, t = rec.get("k"), float(rec.get("t") or 0.0)
    if kind == "m":
        _add_row(data.metrics, rec, t, attempt, rank)
    elif kind == "st":
        duration = rec.get("d")
        parts = rec.get("a")
        if duration and isinstance(parts, list):
            add_anatomy(data, rank, [rec.get("s")], [t], [duration], parts, attempt)
        if duration:
            series = data.step_times.get(rank)
            if series is None:
                series = data.step_times[rank] = rank_series("step_time", rank)
            _append(series, rec.get("s"), duration, t, attempt, rank)
            wait = rec.get("w")
            if wait is not None:
                data.data_wait_total[rank] = data.data_wait_total.get(rank, 0.0) + wait
                waits = data.data_wait.get(rank)
                if waits is None:
                    waits = data.data_wait[rank] = rank_series("data_wait", rank)
                _append(waits, rec.get("s"), wait, t, attempt, rank)
                if len(waits.values) > 2 * DATA_WAIT_TAIL:
                    trim(waits)
            for field, name in (("n", "samples_per_second"), ("tok", "tokens_per_second")):
                if rec.get(field):
                    key = f"{name}{{rank={rank}}}"
                    tput = data.throughput.get(key)
                    if tput is None:
                        tput = data.throughput[key] = rank_series(name, rank)
                    _append(tput, rec.get("s"), rec[field] / duration, t, attempt, rank)
    elif kind == "x":
        attrs = rec.get("a") or {}
        key = series_key(rec.get("n", "?"), {k: str(v) for k, v in attrs.items()})
        found = data.system.get(key)
        if found is None:
            found = data.system[key] = Series(
                name=rec.get("n", "?"), tags={k: str(v) for k, v in attrs.items()}
            )
            found.tags["unit"] = str(rec.get("u", ""))
        _append(found, None, rec.get("v"), t, attempt, rank)
    elif kind == "s":
        data.phases.append({**rec, "attempt": attempt, "rank": rank})
    elif kind == "l":
        data.logs.append(
            {
                "time": t,
                "level": rec.get("lvl", "INFO"),
                "message": rec.get("msg", ""),
                "traceback": (rec.get("a") or {}).get(Attr.EXCEPTION_STACKTRACE),
                "attributes": rec.get("a") or {},
                "attempt": attempt,
                "rank": rank,
            }
        )
    elif kind == "e":
        if rec.get("n") == Event.COMPLETIONS:  # kept bounded, apart from the events
            body = rec.get("b")
            if isinstance(body, dict):
                step = (rec.get("a") or {}).get(Attr.STEP)
                data.completions.add(rows_of(step if isinstance(step, int) else None, body))
            return
        if rec.get("n") == Event.GENAI_SPAN:  # an agent loop's span, apart from the events
            body = rec.get("b")
            if len(data.genai_spans) >= MAX_GENAI_SPANS:
                data.stats["genai_spans_over"] = int(data.stats.get("genai_spans_over", 0)) + 1
            elif isinstance(body, dict):
                data.genai_spans.append({**body, "attributes": rec.get("a") or {}, "rank": rank})
            return
        event = {
            "time": t,
            "name": rec.get("n"),
            "attributes": rec.get("a") or {},
            "body": rec.get("b"),
            "attempt": attempt,
            "rank": rank,
        }
        data.events.append(event)
        if event["name"] == Event.CHECKPOINT_SAVED:
            a: JsonObject = rec.get("a") or {}
            data.checkpoints.append(
                {
                    "step": a.get(Attr.STEP),
                    "path": a.get(Attr.CHECKPOINT_PATH),
                    "size_bytes": a.get(Attr.CHECKPOINT_SIZE),
                    "time": t,
                    "best": bool(a.get(Attr.CHECKPOINT_BEST)),
                    "metric": a.get(Attr.CHECKPOINT_METRIC),
                    "value": a.get(Attr.CHECKPOINT_METRIC_VALUE),
                    "attempt": attempt,
                    "rank": rank,
                }
            )
        elif event["name"] == Event.SYSTEM and isinstance(event["body"], dict):
            for name, value in event["body"].items():
                series = data.system.setdefault(name, Series(name=name, tags={"unit": ""}))
                _append(series, None, value, t, attempt, rank)
