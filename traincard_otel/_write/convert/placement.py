"""Metrics read from framework sources (off the training thread), placed at their step's end.

A metric source (``Reporter.add_metric_source``) returns what a framework recorded anyway, such as
the HF Trainer's ``log_history``. The sources are read before the queue is drained, so a report's
step end is in that drain or the one before; each report is placed right after its step end and
takes its time, matching repeated steps (a resume) in order.
"""

from __future__ import annotations

import collections
import operator
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple, cast

from ..._safety import internal_error
from ..._schema import MetricsReport, Report, StepEnd
from ..._types import Reported
from ..queue import MetricSource
from .values import as_step

_INT = {int}


class SourcedRead(NamedTuple):
    values: dict[Reported, Reported]
    step: int | None
    phase: str | None
    t: float  # when it was read


def read_sources(
    sources: Iterable[MetricSource], reject: Callable[[str, str, object], None]
) -> list[SourcedRead]:
    """What the sources hold, in report order; a report that is not a mapping is rejected."""
    read: list[SourcedRead] = []
    for source in sources:
        try:
            now = time.time()
            for values, step, phase in source():
                if not isinstance(values, dict):
                    if not isinstance(values, collections.abc.Mapping):
                        reject("bad_report", "a metric source gave %r, not a mapping", values)
                        continue
                    values = dict(values)
                if step is not None and type(step) is not int:
                    step = as_step(step)
                read.append(SourcedRead(values, step, phase, now))
        except Exception as exc:
            internal_error("metric source", exc)
    return read


def place_after_step_ends(
    items: list[Report], read: list[SourcedRead], last_end: tuple[object, float] | None
) -> list[Report]:
    """``items`` with the reports read from sources, each placed and timed at its step's end.

    A report read for step N was made after step N ended, so it goes right after that step end in
    ``items`` and takes its time. Step ends repeat after a rewind (a resumed run), so reports are
    matched to them in order: each to the first step end of its step still to come. A report
    whose step has none in ``items`` is placed where the walk has got to: made after ``last_end``
    (the previous drain's last step end, as (step, time)), or else timed as read.
    """
    try:
        placed = _at_unique_step_ends(items, read)
        return placed if placed is not None else _walk_step_ends(items, read, last_end)
    except TypeError:  # an unhashable step from step_end(), rejected with its row: timed as read
        return items + [MetricsReport(r.t, r.step, r.phase, r.values, None) for r in read]


def _at_unique_step_ends(items: list[Report], read: list[SourcedRead]) -> list[Report] | None:
    """The common case with a loop over the reports only (a call per item cost about 0.5 µs a
    step): no step ends twice in ``items`` and each report's step end is there, in report order.
    None if not."""
    at = [i for i, item in enumerate(items) if type(item) is StepEnd]
    ends = {items[i][1]: i for i in at}  # [1]: a step end's step
    if len(ends) != len(at) or not set(map(type, ends)) <= _INT:
        return None  # a rewind repeats a step (the walk matches reports in order), or not int steps
    where = [ends.get(report.step, -1) for report in read]
    if -1 in where or not all(map(operator.le, where, where[1:])):
        return None
    out: list[Report] = []
    done = 0  # items[:done] are in out
    for report, i in zip(read, where, strict=True):
        if i >= done:
            out += items[done : i + 1]
            done = i + 1
        out.append(MetricsReport(cast(StepEnd, items[i]).t, report.step, report.phase, report.values, None))
    out += items[done:]
    return out


def _with_int_step(item: Report) -> Report:
    """A step end with its step as an int where it is a number (numpy, tensor, float)."""
    if type(item) is not StepEnd or type(item.step) is int:
        return item
    step = as_step(item.step)
    return item if step is None else item._replace(step=step)


def _walk_step_ends(
    items: list[Report], read: list[SourcedRead], last_end: tuple[object, float] | None
) -> list[Report]:
    """:func:`place_after_step_ends` for any ``items``, a step end at a time."""
    if not {type(item.step) for item in items if type(item) is StepEnd} <= _INT:
        items = list(map(_with_int_step, items))  # matched to reports as the converter stores them
    left = collections.Counter(item.step for item in items if type(item) is StepEnd)
    out: list[Report] = []
    j, n = 0, len(read)

    def emit_ready(step_end: StepEnd | None) -> None:
        nonlocal j
        while j < n:
            values, step, phase, t = read[j]
            if step_end is not None and step == step_end.step:
                t = step_end.t
            elif left[step] != 0:
                return  # its step end is still to come
            elif last_end is not None and step == last_end[0]:
                t = last_end[1]
            out.append(MetricsReport(t, step, phase, values, None))
            j += 1

    emit_ready(None)
    for item in items:
        out.append(item)
        if type(item) is StepEnd:
            left[item.step] -= 1
            emit_ready(item)
    return out
