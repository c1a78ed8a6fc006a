"""One rank's timed steps as goodput reads them: the reader's columns, sorted by end time, every pass
over them a C-level one (``sum``, ``bisect``, ``map``), never a Python loop per step.

What depends on every step (that the steps are in time order, each attempt's first and last
step, the counted steps' total, the steps run again) is kept per series for the steps analysed so
far (:class:`_Prefix`): a live card's series only grow, so its refreshes analyse the new steps
only and the analysis does not grow with the run. A prefix is used only when it still holds: the
same series, its last step unchanged, the same evaluation steps left out of it.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator
import weakref
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .._types import Foreign

if TYPE_CHECKING:
    from .._data.rundata import Series

Ranges = list[tuple[int, int]]
Spans = dict[int, tuple[int, int, float]]  # attempt -> first and last step (indexes), earliest start


#: Columns longer than this are compared with numpy where it is installed (it comes with pyarrow,
#: which reads the store's parts): a million steps in milliseconds, against tens of them a pass.
VECTOR_MIN = 50_000


def _vector(column: Sequence[object], lo: int, hi: int) -> Foreign:
    """``column[lo:hi]`` as a numpy view without a copy; None for a short, untyped or unviewable
    column, or where numpy is not installed."""
    if hi - lo < VECTOR_MIN or not isinstance(column, array) or column.typecode not in "dq":
        return None
    try:
        import numpy
    except ImportError:
        return None
    return numpy.frombuffer(column, dtype=numpy.float64 if column.typecode == "d" else numpy.int64)[lo:hi]


def _non_decreasing(column: Sequence[float], start: int) -> bool:
    """Whether ``column[start:]`` never falls (a NaN falls)."""
    v = _vector(column, start, len(column))
    if v is not None:
        return bool((v[1:] >= v[:-1]).all())
    return all(
        map(operator.le, itertools.islice(column, start, None), itertools.islice(column, start + 1, None))
    )


def _falls(steps: Sequence[int], lo: int, hi: int) -> Iterable[int]:
    """The indexes in ``lo+1..hi-1`` whose step is at or below the one before it."""
    v = _vector(steps, lo, hi)
    if v is not None:
        return [lo + 1 + int(i) for i in (v[1:] <= v[:-1]).nonzero()[0]]
    return itertools.compress(range(lo + 1, hi), map(operator.le, steps[lo + 1 : hi], steps[lo : hi - 1]))


@dataclasses.dataclass
class _Prefix:
    """What the first ``n`` steps of a series were found to hold."""

    n: int
    last_end: float
    spans: Spans
    excluded: Ranges  # the steps left out of the totals below
    total: float  # the durations of the steps counted
    reached: int | None  # the highest step reached
    recomputed: Ranges  # the steps run again


_prefixes: dict[int, _Prefix] = {}  # by id() of a series, dropped with it (weakref.finalize)


class TimedSteps:
    """One rank's timed steps sorted by end time (no copy when they are in order)."""

    def __init__(self, series: Series) -> None:
        times = series.times
        self.key = id(series)
        known = _prefixes.get(self.key)
        if known is not None and not (known.n <= len(times) and times[known.n - 1] == known.last_end):
            known = None  # not a series that grew: a new one, or changed
        start = known.n - 1 if known is not None else 0
        self.in_order = _non_decreasing(times, start)
        if self.in_order:  # the usual case
            self.ends, self.durations = series.times, series.values
            self.steps, self.attempts = series.steps, series.attempts
            if known is None and len(times):
                weakref.finalize(series, _prefixes.pop, self.key, None)
        else:  # ranks' clocks, or attempts read out of order
            order = sorted(range(len(series.values)), key=times.__getitem__)
            self.ends = [times[i] for i in order]
            self.durations = [series.values[i] for i in order]
            self.steps = [series.steps[i] for i in order]
            self.attempts = [series.attempts[i] for i in order]
            known = None
        self.known = known
        self.excluded: Ranges = []  # index ranges of evaluation steps, disjoint, in order
        self.spans: Spans = {}

    def exclude(self, t0: float, t1: float) -> None:
        """Leave out the steps that end in [t0, t1) (evaluation steps: their time is the phase's)."""
        lo, hi = bisect.bisect_right(self.ends, t0), bisect.bisect_right(self.ends, t1)
        if lo < hi:
            self.excluded = _union([*self.excluded, (lo, hi)])

    def total(self, ranges: Sequence[tuple[int, int]]) -> float:
        """The summed durations of the steps in ``ranges``."""
        return sum(sum(self.durations[lo:hi]) for lo, hi in ranges)

    def overlap(self, lo: float, hi: float) -> float:
        """Seconds of counted step time inside [lo, hi)."""
        total = 0.0
        i = bisect.bisect_right(self.ends, lo)
        while i < len(self.ends) and self.ends[i] - self.durations[i] < hi:
            if not inside(i, self.excluded):
                total += max(0.0, min(hi, self.ends[i]) - max(lo, self.ends[i] - self.durations[i]))
            i += 1
        return total

    def attempt_spans(self) -> Spans:
        """Each attempt's first and last step (indexes) and the earliest start of its steps."""
        known, n = self.known, len(self.ends)
        spans = dict(known.spans) if known is not None else {}
        for a, (first, last, start) in self._spans(known.n if known is not None else 0, n).items():
            had = spans.get(a)
            spans[a] = (first, last, start) if had is None else (had[0], last, min(had[2], start))
        self.spans = spans
        return spans

    def counted(self) -> tuple[float, Ranges]:
        """The summed durations of the steps not left out, and the index ranges of those that run
        again a step an earlier one reached (a step number at or below the highest reached so
        far): a resume's or a retry's. Call after :meth:`attempt_spans` and :meth:`exclude`."""
        n, known = len(self.ends), self.known
        start = known if known is not None and known.excluded == _clip(self.excluded, known.n) else None
        ranges, at = [], start.n if start is not None else 0
        for lo, hi in self.excluded:
            if at < lo:
                ranges.append((at, lo))
            at = max(at, hi)
        if at < n:
            ranges.append((at, n))
        total = (start.total if start is not None else 0.0) + self.total(ranges)
        redone, reached = recomputed(self.steps, ranges, start.reached if start is not None else None)
        again = [*(start.recomputed if start is not None else []), *redone]
        if self.in_order and n:  # what the next analysis of this series starts from
            _prefixes[self.key] = _Prefix(
                n, self.ends[n - 1], self.spans, _clip(self.excluded, n), total, reached, again
            )
        return total, again

    def _spans(self, lo: int, n: int) -> Spans:
        attempts = self.attempts
        spans: Spans = {}
        while lo < n:  # attempts are usually stretches of steps: one count() per attempt
            a = attempts[lo]
            tail = attempts[lo:n]
            hi = lo + tail.count(a)
            if attempts[lo:hi].count(a) != hi - lo:
                return self._scattered_spans(lo, n, spans)
            spans[a] = (lo, hi - 1, self._earliest_start(lo, hi))
            lo = hi
        return spans

    def _scattered_spans(self, lo: int, n: int, spans: Spans) -> Spans:
        for i in range(lo, n):
            a, start = self.attempts[i], self.ends[i] - self.durations[i]
            first, _last, earliest = spans.get(a, (i, i, start))
            spans[a] = (first, i, min(earliest, start))
        return spans

    def _earliest_start(self, lo: int, hi: int) -> float:
        """The earliest start of the steps ``lo..hi-1`` (sorted by end time)."""
        ends, durations = self.ends, self.durations
        # only a step ending before the first one's start plus the longest duration can start
        # earlier than the first one
        reach = bisect.bisect_left(ends, ends[lo] - durations[lo] + max(durations[lo:hi]), lo, hi)
        return float(min(map(operator.sub, ends[lo : reach + 1], durations[lo : reach + 1])))


def recomputed(
    steps: Sequence[object], ranges: Sequence[tuple[int, int]], reached: int | None
) -> tuple[Ranges, int | None]:
    """The index ranges of the steps in ``ranges`` that run a step again, and the highest step
    reached after them, given the step ``reached`` before them (None: none yet).

    A step runs again where its number is at or below the highest an earlier step reached (a
    resume's or a retry's); a step that is not an integer is neither. The read-time goodput and
    the writer's :class:`~.goodput_tally.GoodputTally` both judge by this rule.
    """
    if isinstance(steps, array) and steps.typecode == "q":
        return _recomputed_columns(steps, ranges, reached)
    return _recomputed_rows(steps, ranges, reached)


def _recomputed_columns(
    steps: array[int], ranges: Sequence[tuple[int, int]], reached: int | None
) -> tuple[Ranges, int | None]:
    """:func:`recomputed` at C speed: one pass per stretch where the step number rises."""
    out: Ranges = []
    for lo, hi in ranges:
        # stretches where the step number rises; a resume starts a new one
        backs = _falls(steps, lo, hi)
        for a, b in itertools.pairwise([lo, *backs, hi]):
            if reached is not None:
                cut = bisect.bisect_right(steps, reached, a, b)  # the rising stretch's redone head
                if cut > a:
                    out.append((a, cut))
                if cut < b:
                    reached = max(reached, steps[b - 1])
            else:
                reached = steps[b - 1]
    return out, reached


def _recomputed_rows(
    steps: Sequence[object], ranges: Sequence[tuple[int, int]], reached: int | None
) -> tuple[Ranges, int | None]:
    """:func:`recomputed` a step at a time (steps that are not all integers)."""
    out: Ranges = []
    for lo, hi in ranges:
        for i in range(lo, hi):
            step = steps[i]
            if type(step) is not int:
                continue
            if reached is not None and step <= reached:
                if out and out[-1][1] == i:
                    out[-1] = (out[-1][0], i + 1)
                else:
                    out.append((i, i + 1))
            else:
                reached = step
    return out, reached


def _union(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def _clip(ranges: Ranges, n: int) -> Ranges:
    """``ranges`` within [0, n)."""
    return [(lo, min(hi, n)) for lo, hi in ranges if lo < n]


def inside(i: int, ranges: Sequence[tuple[int, int]]) -> bool:
    """Whether index ``i`` is in one of ``ranges`` (disjoint, in order)."""
    k = bisect.bisect_right(ranges, (i, math.inf)) - 1
    return k >= 0 and ranges[k][0] <= i < ranges[k][1]
