"""The anatomy of a step: where each rank's step time goes, and which part makes a straggler slow.

Each rank's recent window (its last ``RECENT_STEPS`` steps of the latest attempt) gives, per part
(``ANATOMY_PARTS``: data, forward, backward, optimizer, communication, other), the median seconds
and the median share of the step. In synchronous data-parallel training every rank's step takes
as long as the slowest rank's, so step times cannot tell the straggler: it is the rank that works
longest in its own parts (its step without the time it waited in collectives), and the others
wait for it in communication. Pure functions of :class:`~traincard_otel._data.rundata.RunData`.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Final

from .._data.anatomy import StepParts
from .._data.rundata import RunData
from .._schema import ANATOMY_PARTS, STEP_PARTS

RECENT_STEPS: Final = 50
MIN_STEPS: Final = 5  # a rank needs this many steps in its window to be compared
STRAGGLER_FACTOR: Final = 1.2  # its own work at least 1.2x the median rank's ...
STRAGGLER_MIN_S: Final = 0.002  # ... and at least 2 ms longer
COMMUNICATION: Final = "communication"
OTHER: Final = "other"


@dataclasses.dataclass(frozen=True)
class RankAnatomy:
    """One rank's recent steps: median seconds and median share of the step per part."""

    rank: int
    steps: int  # steps in the window
    step_s: float  # median step time
    own_s: float  # median step time without the wait in communication
    seconds: dict[str, float]  # per measured part and "other"
    shares: dict[str, float]  # each part's median share, scaled to add up to 1
    unmeasured: tuple[str, ...]  # parts the rank's adapter could not measure


@dataclasses.dataclass(frozen=True)
class Straggler:
    """The rank that makes the others wait, and the part that makes it slow."""

    rank: int
    median_rank: int
    part: str
    slow_s: float
    median_s: float
    own_ratio: float  # its own work over the median rank's
    others_wait: bool  # the other ranks wait in communication
    text: str


@dataclasses.dataclass(frozen=True)
class StepAnatomy:
    """Every rank's anatomy, the slowest and the median rank, and the straggler if there is one."""

    ranks: tuple[RankAnatomy, ...]
    slowest: int | None  # the rank that works longest in its own parts (several ranks only)
    median: int | None  # the median rank by that work
    straggler: Straggler | None

    def rank(self, rank: int) -> RankAnatomy | None:
        return next((r for r in self.ranks if r.rank == rank), None)


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _window(parts: StepParts) -> range:
    """The latest attempt's last ``RECENT_STEPS`` steps."""
    n = len(parts)
    if not n:
        return range(0)
    latest = parts.attempts[-1]
    start = n - 1
    while start > 0 and parts.attempts[start - 1] == latest and n - start < RECENT_STEPS:
        start -= 1
    return range(start, n)


def rank_anatomy(rank: int, parts: StepParts) -> RankAnatomy | None:
    """A rank's recent anatomy; None without a timed step that carries one."""
    window = _window(parts)
    if not window:
        return None
    start, stop = window.start, window.stop
    return window_anatomy(
        rank, parts.durations[start:stop], [column[start:stop] for column in parts.parts], parts.measured()
    )


def window_anatomy(
    rank: int,
    durations: Sequence[float],
    columns: Sequence[Sequence[float]],
    measured: Sequence[bool] | None = None,
) -> RankAnatomy | None:
    """The anatomy of a window of steps: their ``durations`` and one column of seconds per part of
    ``STEP_PARTS`` (NaN where not measured; ``measured``, when given, says which parts the run
    measured at all, else a part is measured where its column has a number). Column at a time:
    the converter summarises its recent steps with it at every status, on a thread that competes
    with training for the GIL."""
    n = len(durations)
    if not n:
        return None
    if measured is None:
        measured = [any(v == v for v in column) for column in columns]
    known = [column for column, m in zip(columns, measured, strict=True) if m]
    rows = zip(*known, strict=True) if known else ((),) * n
    other = [max(d - sum(v for v in row if v == v), 0.0) for d, row in zip(durations, rows, strict=True)]
    names = [p for p, m in zip(STEP_PARTS, measured, strict=True) if m] + [OTHER]
    by_name = dict(zip(names, [*known, other], strict=True))
    seconds = {p: _median([v for v in column if v == v]) for p, column in by_name.items()}
    shares = {
        p: _median([v / d for v, d in zip(column, durations, strict=True) if v == v])
        for p, column in by_name.items()
    }
    total = sum(shares.values())
    waits = columns[STEP_PARTS.index(COMMUNICATION)]
    own = [d - w if w == w else d for d, w in zip(durations, waits, strict=True)]
    return RankAnatomy(
        rank=rank,
        steps=n,
        step_s=_median(durations),
        own_s=_median(own),
        seconds=seconds,
        shares={p: v / total for p, v in shares.items()} if total > 0 else shares,
        unmeasured=tuple(p for p, m in zip(STEP_PARTS, measured, strict=True) if not m),
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def straggler(ranks: Sequence[RankAnatomy]) -> tuple[int | None, int | None, Straggler | None]:
    """(slowest rank, median rank, the straggler when the slowest works at least
    ``STRAGGLER_FACTOR`` times as long as the median rank in its own parts)."""
    timed = [r for r in ranks if r.steps >= MIN_STEPS]
    if len(timed) < 2:
        return None, None, None
    by_work = sorted(timed, key=lambda r: (r.own_s, r.rank))
    slow = by_work[-1]
    others = by_work[:-1]
    mid = others[(len(others) - 1) // 2]
    if not (slow.own_s >= STRAGGLER_FACTOR * mid.own_s and slow.own_s - mid.own_s >= STRAGGLER_MIN_S):
        return slow.rank, mid.rank, None
    gaps = {p: slow.seconds[p] - mid.seconds.get(p, 0.0) for p in slow.seconds if p != COMMUNICATION}
    part = max(gaps, key=lambda p: gaps[p])
    waits = [r.seconds.get(COMMUNICATION) for r in others]
    known = [w for w in waits if w is not None]
    mine = slow.seconds.get(COMMUNICATION)
    others_wait = bool(known) and mine is not None and _median(known) - mine >= 0.5 * (slow.own_s - mid.own_s)
    text = (
        f"rank {slow.rank} is the straggler: {part} {_ms(slow.seconds[part])} vs "
        f"{_ms(mid.seconds.get(part, 0.0))} on the median rank (rank {mid.rank})"
    )
    if others_wait:
        text += "; the other ranks wait in communication"
    found = Straggler(
        rank=slow.rank,
        median_rank=mid.rank,
        part=part,
        slow_s=slow.seconds[part],
        median_s=mid.seconds.get(part, 0.0),
        own_ratio=slow.own_s / mid.own_s if mid.own_s > 0 else float("inf"),
        others_wait=others_wait,
        text=text,
    )
    return slow.rank, mid.rank, found


def step_anatomy(data: RunData) -> StepAnatomy | None:
    """Every rank's anatomy and the straggler; None when no rank's steps carry one."""
    ranks = tuple(
        r for rank, parts in sorted(data.anatomy.items()) if (r := rank_anatomy(rank, parts)) is not None
    )
    if not ranks:
        return None
    slowest, median, found = straggler(ranks)
    return StepAnatomy(ranks=ranks, slowest=slowest, median=median, straggler=found)


def summary(seconds: dict[str, float]) -> str:
    """``forward 41 ms, backward 30 ms, ...`` for parts in the anatomy's order."""
    return ", ".join(f"{p} {_ms(seconds[p])}" for p in ANATOMY_PARTS if p in seconds)
