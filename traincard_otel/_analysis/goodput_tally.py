"""Goodput as a run goes, from what one process's converter sees: its own attempt, never its store.

:class:`GoodputTally` is fed the timed step ends, the phases and the stalls of one process in the
order they are reported, and splits that attempt's wall time into the categories of
:mod:`.goodput`, with its definitions (the phases each category takes, how overlapping phases and
stalls resolve, which steps run again, how step time splits into data wait, restart and productive
time). What it cannot see is what the read-time :func:`.goodput.goodput` adds for a whole run:
earlier attempts (their time, the gap between attempts, and steps an earlier attempt already
reached, which this attempt re-computes), and other processes' records. Within its attempt it sees
more: every step's own data wait (the reader keeps the last 1000), and a phase still open (counted
up to now).

Memory stays bounded however long the run: steps are summed as they arrive. A step whose end falls
in an open evaluation or checkpoint phase is that phase's time (phase ends follow their steps in
report order, so "open when the step arrives" is "its end is inside"); a counted step that overlaps
a phase or a stall has the overlap taken off when the two meet: a phase or stall that ended before
the step arrived is checked on arrival, one that ends later against the last
:data:`RECENT_STEPS` counted steps. Ended phases and stalls are folded into per-category totals
once nothing can start before their end any more (a phase starts after every step reported before
it; a stall after the last step end the watchdog saw).
"""

from __future__ import annotations

import bisect
import collections
import math
import operator
from collections.abc import Sequence
from typing import Final

from .goodput import (
    CATEGORIES,
    SPECIAL,
    Goodput,
    Piece,
    add_edges,
    disjoint,
    overlap,
    phase_category,
    settle,
    split_steps,
)
from .steps import recomputed

RECENT_STEPS: Final = 4096  # counted steps kept as intervals, for phases and stalls that end after them
RECENT_PIECES: Final = 64  # folded phases and stalls kept, for steps reported after they end

# (steps, end times, durations, data waits) of a stretch of step ends
_Columns = tuple[Sequence[int], Sequence[float], Sequence[float], Sequence[float]]


class GoodputTally:
    """One attempt's goodput, fed as the converter goes (see the module docstring).

    Not thread-safe: the feeding and :meth:`goodput` must not run at once (the writer's tally
    holds a lock around both).
    """

    def __init__(self, started_at: float, *, rank: int = 0, first_attempt: bool = True) -> None:
        self.started_at, self.rank, self.first_attempt = started_at, rank, first_attempt
        self._open: dict[int, tuple[float, str]] = {}  # phase token -> (start, eval | checkpoint)
        self._stall_from: float | None = None
        self._pieces: list[Piece] = []  # ended phases and stalls, not folded yet
        self._folded = dict.fromkeys(SPECIAL, 0.0)
        self._head_pieces: list[Piece] = []  # folded ones before the first step (start-up's phases)
        self._recent_pieces: list[Piece] = []  # the latest folded ones, disjoint
        self._recent_ends: list[float] = []  # their ends
        # The last counted steps, as the columns they came in (end times, durations), newest last.
        self._recent: collections.deque[tuple[Sequence[float], Sequence[float]]] = collections.deque()
        self._recent_rows = 0
        self._counted = 0.0  # counted steps' durations
        self._in_special = 0.0  # ...of which inside folded phases and stalls
        self._wait_total = 0.0
        self._redone_waited = 0.0
        self._redone_unknown = 0.0
        self._reached: int | None = None
        self._first_start: float | None = None
        self._last_end: float | None = None
        self.steps = 0

    # -- fed in report order --------------------------------------------------------------------
    def phase_started(self, t: float, name: str, token: int) -> None:
        category = phase_category(name)
        if category is not None:
            self._open[token] = (t, category)

    def phase_ended(self, t: float, token: int) -> None:
        found = self._open.pop(token, None)
        if found is not None and t > found[0]:
            self._pieces.append((found[0], t, found[1]))

    def phases_closed(self, t: float) -> None:
        """Every open phase ended at ``t`` (the run ended)."""
        for token in list(self._open):
            self.phase_ended(t, token)

    def stall_started(self, t: float, idle_s: float) -> None:
        self._stall_from = t - idle_s

    def stall_cleared(self, t: float, duration_s: float) -> None:
        start = self._stall_from if self._stall_from is not None else t - duration_s
        self._stall_from = None
        if t > start:
            self._pieces.append((start, t, "stall"))
        self._fold()

    def add_steps(
        self,
        steps: Sequence[int],
        times: Sequence[float],
        durations: Sequence[float],
        waits: Sequence[float],
    ) -> None:
        """Step ends, in report order: a NaN duration is no timed step, a NaN wait not measured."""
        cols = (steps, times, durations, waits)
        if not self._add_common(cols):
            self._add_each(cols)
        self._fold()

    def _add_common(self, cols: _Columns) -> bool:
        """Add the common stretch column by column (every step timed and counted, its wait
        measured, after the last one's end and the last phase or stall, numbered upwards); False,
        with nothing changed, for anything else."""
        steps, times, durations, waits = cols
        n = len(durations)
        if not n or self._open or not math.isfinite(total := math.fsum(durations)) or min(durations) <= 0:
            return False
        waited = sum(waits)
        if waited != waited:  # waits not measured (NaN) count as none, as row by row
            known = [w for w in waits if w == w]
            waited = sum(known)
            if waited != waited or (known and min(known) < 0):
                return False
        elif min(waits) < 0:
            return False
        if set(map(type, steps)) != {int}:
            return False
        if not all(map(operator.lt, steps, steps[1:])) or (
            self._reached is not None and steps[0] <= self._reached
        ):
            return False
        if not all(map(operator.le, times, times[1:])):
            return False
        lowest = times[0] - max(durations)  # no step of the stretch starts before this
        first: float | None = None
        if self._recent_pieces and lowest < self._recent_pieces[-1][1]:
            first = min(map(operator.sub, times, durations))
            if first < self._recent_pieces[-1][1]:
                return False
        if self._first_start is None or lowest < self._first_start:
            first = min(map(operator.sub, times, durations)) if first is None else first
            self._first_start = first if self._first_start is None else min(self._first_start, first)
        self.steps += n
        self._counted += total
        self._wait_total += waited
        self._reached = steps[-1]
        self._last_end = times[-1] if self._last_end is None else max(self._last_end, times[-1])
        self._remember(times, durations)
        return True

    def _remember(self, ends: Sequence[float], durations: Sequence[float]) -> None:
        """Keep counted steps' columns, as long as the newer ones hold fewer than RECENT_STEPS."""
        if not ends:
            return
        self._recent.append((ends, durations))
        self._recent_rows += len(ends)
        while self._recent_rows - len(self._recent[0][0]) >= RECENT_STEPS:
            self._recent_rows -= len(self._recent.popleft()[0])

    def _add_each(self, cols: _Columns) -> None:
        excluded = bool(self._open)  # a step ending inside an open eval or checkpoint phase
        recent = self._recent_pieces
        steps: list[int] = []  # the counted steps' columns
        ends: list[float] = []
        counted: list[float] = []
        waits: list[float] = []
        for step, end, d, w in zip(*cols, strict=True):
            if d != d or d <= 0:
                continue
            start = end - d
            self.steps += 1
            if self._first_start is None or start < self._first_start:
                self._first_start = start
            if self._last_end is None or end > self._last_end:
                self._last_end = end
            if w == w:  # measured
                self._wait_total += w
            if excluded:
                continue
            self._counted += d
            if recent and start < recent[-1][1]:  # (the pieces end in order: only the last few count)
                self._in_special += overlap(
                    start, end, recent[bisect.bisect_right(self._recent_ends, start) :]
                )
            steps.append(step)
            ends.append(end)
            counted.append(d)
            waits.append(w)
        redone, self._reached = recomputed(steps, [(0, len(steps))], self._reached)
        for lo, hi in redone:  # run again after a rewind
            for d, w in zip(counted[lo:hi], waits[lo:hi], strict=True):
                if w == w:
                    self._redone_waited += d - min(w, d)
                else:
                    self._redone_unknown += d
        self._remember(ends, counted)

    def _fold(self) -> None:
        """Fold the ended phases and stalls that nothing can overlap any more into the totals."""
        if not self._pieces or self._last_end is None:
            return
        frontier = min(
            [self._last_end, *(t0 for t0, _c in self._open.values())]
            + ([self._stall_from] if self._stall_from is not None else [])
        )
        pieces = sorted(self._pieces)
        cut, reach = 0, float("-inf")
        for i, (_t0, t1, _c) in enumerate(pieces):
            reach = max(reach, t1)
            if reach > frontier:
                break
            if i + 1 == len(pieces) or reach <= pieces[i + 1][0]:
                cut = i + 1
        if not cut:
            return
        folded, self._pieces = disjoint(pieces[:cut]), pieces[cut:]
        for lo, hi, category in folded:
            self._folded[category] += hi - lo
            self._in_special += self._recent_overlap(lo, hi)
        first = self._first_start if self._first_start is not None else float("inf")
        self._head_pieces = (self._head_pieces + [p for p in folded if p[0] < first])[:RECENT_PIECES]
        self._recent_pieces = (self._recent_pieces + folded)[-RECENT_PIECES:]
        self._recent_ends = [t1 for _t0, t1, _c in self._recent_pieces]

    def _recent_overlap(self, lo: float, hi: float) -> float:
        """Seconds of the recent counted steps inside [lo, hi): the newest first, up to the first
        that ended before ``lo`` (steps end in report order)."""
        total = 0.0
        for ends, durations in reversed(self._recent):
            for i in range(len(ends) - 1, -1, -1):
                end = ends[i]
                if end <= lo:
                    return total
                start = end - durations[i]
                if start < hi:
                    total += min(hi, end) - max(lo, start)
        return total

    # -- read by the gauges and the summary ---------------------------------------------------
    def goodput(self, now: float, *, running: bool) -> Goodput | None:
        """The attempt so far at ``now`` (None before its first timed step); ``running``: the time
        since the last step end is the step in progress, else shutdown."""
        if self._first_start is None or self._last_end is None:
            return None
        end = max(now, self._last_end)
        pieces = list(self._pieces) + [(t0, end, c) for t0, c in self._open.values() if end > t0]
        if self._stall_from is not None and end > self._stall_from:
            pieces.append((self._stall_from, end, "stall"))
        special = disjoint(pieces)
        seconds = dict.fromkeys(CATEGORIES, 0.0)
        in_special = self._in_special
        for lo, hi, category in special:
            seconds[category] += hi - lo
            in_special += self._recent_overlap(lo, hi)
        for category, total in self._folded.items():
            seconds[category] += total
        seconds["data_wait"], seconds["restart"], seconds["productive"] = split_steps(
            self._counted - in_special, self._wait_total, self._redone_waited, self._redone_unknown
        )
        start = min(self.started_at, self._first_start)
        add_edges(  # (folded phases and stalls end before the unfolded ones begin: still disjoint)
            seconds,
            (start, end),
            (self._first_start, self._last_end),
            self._head_pieces + special,
            first=self.first_attempt,
            last=True,
            running=running,
        )
        wall = max(end - start, 0.0)
        return Goodput(
            wall_s=wall, seconds=settle(seconds, wall), rank=self.rank, attempts=1, running=running
        )
