"""Series for display: min/max downsampling, live tails, coarse heads, and splits at resumes.

Downsampling keeps the min and the max of each bucket, so spikes and extremes stay visible at any
run length; live payloads carry only each series' tail.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from array import array
from collections.abc import Iterable, Sequence
from typing import Literal, cast

from ..._data.rundata import Series
from ..._types import JsonValue

MAX_POINTS = 2000  # per series in a full render (min and max of 1000 buckets)
# A chart with one series per rank shares a budget: 64 ranks x 2000 points made a 64-rank card
# 2.2 MB. Each rank keeps at least RANK_MIN_POINTS (min and max of 100 buckets): readable, and
# its spikes survive as they do at any length.
RANK_CHART_POINTS = 12_000
RANK_MIN_POINTS = 200
LIVE_TAIL = 150  # points per series in a live update, at most (the page keeps what it drew)
LIVE_WINDOW_S = 30.0  # a live update covers at least this much recent history
LIVE_SCAN_MAX = 20_000  # ...but never scans more points than this per series
HEAD_POINTS = 100  # coarse whole-series picture in live updates, to back-fill a page opened mid-run
HEAD_REFRESH_S = 20.0
LIVE_LOG_TAIL = 80

XY = tuple[list[float], list[float | None]]
Axis = Literal["step", "time"]


@dataclasses.dataclass(frozen=True)
class Mode:
    """How much of each section a payload carries: everything (``live=False``) or recent tails."""

    live: bool
    tail: int = LIVE_TAIL
    log_tail: int = LIVE_LOG_TAIL
    heads: bool = True


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def downsample(
    xs: Sequence[float], ys: Sequence[float], max_points: int = MAX_POINTS, span: range | None = None
) -> XY:
    """Keep the min and the max of each bucket, in x order (spikes survive any zoom level).

    ``span``: the points of ``xs`` and ``ys`` to take (all of them by default), read in place."""
    first, stop = (span.start, span.stop) if span is not None else (0, len(xs))
    n = stop - first
    if n <= max_points:
        return list(xs[first:stop]), [_finite(y) for y in ys[first:stop]]
    try:
        import numpy as np
    except ImportError:  # numpy comes with pyarrow/torch; the pure-Python path is only slower
        return downsample_py(xs[first:stop], ys[first:stop], max_points)
    buckets = max_points // 2
    size = -(-n // buckets)
    y = np.full(buckets * size, np.nan)
    y[:n] = np.asarray(ys, dtype=float)[first:stop]  # a typed column is read in place, not copied
    y[~np.isfinite(y)] = np.nan
    grid = y.reshape(buckets, size)
    empty = np.isnan(grid).all(axis=1)
    filled = np.where(np.isnan(grid), np.inf, grid)
    lo = filled.argmin(axis=1)
    hi = np.where(np.isnan(grid), -np.inf, grid).argmax(axis=1)
    rows = np.arange(buckets) * size
    keep = np.unique(np.concatenate([(rows + lo)[~empty], (rows + hi)[~empty], rows[empty]]))
    keep = keep[keep < n]
    x_arr = np.asarray(xs)[first:stop]
    out_y = y[keep]
    return x_arr[keep].tolist(), [None if np.isnan(v) else float(v) for v in out_y]


def downsample_py(xs: Sequence[float], ys: Sequence[float], max_points: int) -> XY:
    """:func:`downsample` without numpy (same points, only slower)."""
    n = len(xs)
    buckets = max_points // 2
    size = n / buckets
    out_x: list[float] = []
    out_y: list[float | None] = []
    for b in range(buckets):
        lo, hi = int(b * size), min(int((b + 1) * size), n)
        idx = [i for i in range(lo, hi) if math.isfinite(ys[i])]
        if not idx:
            if lo < hi:
                out_x.append(xs[lo])
                out_y.append(None)
            continue
        for i in sorted({min(idx, key=ys.__getitem__), max(idx, key=ys.__getitem__)}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


def rank_points(n_series: int) -> int:
    """Points per series in a full render of a chart with ``n_series`` per-rank series."""
    return max(RANK_MIN_POINTS, min(MAX_POINTS, RANK_CHART_POINTS // max(n_series, 1)))


def xy(
    series: Series, mode: Mode, by: Axis = "step", max_points: int = MAX_POINTS, span: range | None = None
) -> XY:
    """The (x, y) a chart draws for ``series`` (its points in ``span``, all by default): all of it
    downsampled (to ``max_points``), or its live tail."""
    xs_all = series.steps if by == "step" else series.times
    span = span if span is not None else range(len(series.values))
    if mode.live:
        return _live_tail(series, xs_all, mode, span)
    if isinstance(xs_all, array) or None not in xs_all:  # the common case, checked at C speed
        return downsample(xs_all, series.values, max_points, span)
    pairs = [(xs_all[i], series.values[i]) for i in span if xs_all[i] is not None]
    return downsample([p[0] for p in pairs], [p[1] for p in pairs], max_points)


def _live_tail(series: Series, xs_all: Sequence[float | None], mode: Mode, span: range) -> XY:
    """The points of the last ``LIVE_WINDOW_S`` seconds (at least ``mode.tail`` points) of
    ``span``, downsampled to ``mode.tail``: a viewer polling less often than we refresh still gets
    every stretch."""
    times = series.times
    n = span.stop
    newest = times[n - 1] if n > span.start else 0.0
    lo = max(span.start, n - LIVE_SCAN_MAX)
    xs, ys = xs_all[lo:n], series.values[lo:n]
    if None in xs:  # points without an x are left out
        keep = [i for i, x in enumerate(xs) if x is not None]
        xs, ys, times = [xs[i] for i in keep], [ys[i] for i in keep], [times[lo + i] for i in keep]
        lo = 0
    # from the end: the last ``mode.tail`` points, then back to the first one older than the window
    cutoff = newest - LIVE_WINDOW_S
    older = next((i for i in range(len(xs) - mode.tail - 1, -1, -1) if times[lo + i] < cutoff), -1)
    start = older + 1
    return downsample(cast("Sequence[float]", xs[start:]), ys[start:], max_points=max(mode.tail, 4))


HEAD_BLOCK = 1024  # points summed up once into a block's min and max: series only grow


@dataclasses.dataclass
class _Blocks:
    """The index of the lowest and of the highest finite point of each whole block of a series
    (or of its first point with an x, when none is finite), kept as the series grows."""

    series: Series
    by: Axis
    lows: list[int] = dataclasses.field(default_factory=list)
    highs: list[int] = dataclasses.field(default_factory=list)

    def update(self) -> None:
        xs_all = self.series.steps if self.by == "step" else self.series.times
        ys = self.series.values
        for start in range(len(self.lows) * HEAD_BLOCK, len(ys) - HEAD_BLOCK + 1, HEAD_BLOCK):
            low, high = _extremes(xs_all, ys, start, start + HEAD_BLOCK)
            self.lows.append(low)
            self.highs.append(high)

    def head(self, buckets: int) -> XY:
        """The min and max of ``buckets`` runs of blocks (the newest points, not a whole block yet,
        as one more), in x order."""
        self.update()
        xs_all = self.series.steps if self.by == "step" else self.series.times
        ys = self.series.values
        lows, highs = list(self.lows), list(self.highs)
        if len(ys) > len(lows) * HEAD_BLOCK:  # the newest points, not a whole block yet
            low, high = _extremes(xs_all, ys, len(lows) * HEAD_BLOCK, len(ys))
            lows.append(low)
            highs.append(high)
        size = -(-len(lows) // max(buckets, 1)) or 1
        keep: set[int] = set()
        for b in range(0, len(lows), size):
            finite = [i for i in lows[b : b + size] + highs[b : b + size] if i >= 0 and _ok(ys[i])]
            if finite:
                keep.add(min(finite, key=ys.__getitem__))
                keep.add(max(finite, key=ys.__getitem__))
            elif (first := next((i for i in lows[b : b + size] if i >= 0), None)) is not None:
                keep.add(first)
        idx = sorted(keep)
        return [xs_all[i] for i in idx], [_finite(ys[i]) for i in idx]


def _ok(v: float) -> bool:
    return v == v and abs(v) != math.inf


def _extremes(xs: Sequence[float | None], ys: Sequence[float], start: int, end: int) -> tuple[int, int]:
    """Indices of the lowest and highest finite y in ``start:end`` with an x; if none is finite,
    the first with an x twice; -1 twice if no point has one."""
    idx = [i for i in range(start, end) if xs[i] is not None]
    finite = [i for i in idx if _ok(ys[i])]
    if finite:
        return min(finite, key=ys.__getitem__), max(finite, key=ys.__getitem__)
    return (idx[0], idx[0]) if idx else (-1, -1)


_head_cache: dict[tuple[int, str], tuple[_Blocks, float, XY]] = {}


def head(series: Series, by: Axis, refresh_s: float = HEAD_REFRESH_S) -> XY:
    """A coarse picture of the whole series, recomputed at most every ``refresh_s`` from block
    summaries kept as the series grows: a refresh costs the new points, not the run."""
    key = (id(series), by)
    cached = _head_cache.get(key)
    now = time.monotonic()
    if cached and cached[0].series is series and now - cached[1] < refresh_s:
        return cached[2]
    blocks = cached[0] if cached and cached[0].series is series else _Blocks(series, by)
    if len(blocks.lows) * HEAD_BLOCK > len(series.values):  # shortened (trimmed): start over
        blocks = _Blocks(series, by)
    out = blocks.head(HEAD_POINTS // 2)
    if len(_head_cache) > 10_000:
        _head_cache.clear()
    _head_cache[key] = (blocks, now, out)
    return out


_cuts_cache: dict[int, tuple[Series, int, list[int]]] = {}


def _cuts(series: Series) -> list[int]:
    """Indices where the step moves backwards, scanned incrementally (series only grow)."""
    cached = _cuts_cache.get(id(series))
    start, cuts = (cached[1], list(cached[2])) if cached and cached[0] is series else (0, [])
    steps = series.steps
    last = next((steps[i] for i in range(start - 1, -1, -1) if steps[i] is not None), None)
    fast = _backwards(steps, start)
    if fast is not None:
        cuts += fast
        start = len(steps)
    for i in range(start, len(steps)):
        step = steps[i]
        if step is None:
            continue
        if last is not None and step < last:
            cuts.append(i)
        last = step
    if len(_cuts_cache) > 10_000:
        _cuts_cache.clear()
    _cuts_cache[id(series)] = (series, len(steps), cuts)
    return cuts


def _backwards(steps: Sequence[JsonValue], start: int) -> list[int] | None:
    """:func:`_cuts`' scan from ``start`` of a typed column (no step missing) at C speed (numpy);
    None where it cannot be."""
    if not isinstance(steps, array) or steps.typecode != "q" or start >= len(steps):
        return None
    try:
        import numpy as np
    except ImportError:
        return None
    new = np.frombuffer(steps, dtype=np.int64)[max(start - 1, 0) :]
    return [int(i) for i in np.flatnonzero(new[1:] < new[:-1]) + max(start - 1, 0) + 1]


def stretches(series: Series, tail: int | None = None) -> list[tuple[int, range]]:
    """Split where the step moves backwards (resume, retry): every stretch stays visible. Each
    stretch is its number and its points (indices of ``series``: read in place, not copied).

    With ``tail``, only the stretches (and points) among the last ``tail`` points are returned.
    """
    cuts = _cuts(series)
    n_points = len(series.steps)
    bounds = [0, *cuts, n_points]
    out = []
    for n, (a, b) in enumerate(itertools.pairwise(bounds)):
        if tail is not None:
            if b <= n_points - tail:
                continue
            a = max(a, n_points - tail)
        out.append((n, range(a, b)))
    return out


def subset(series: Series, idx: Iterable[int]) -> Series:
    """The points of ``series`` at the indices ``idx`` (a range of them as slices, at C speed)."""
    if isinstance(idx, range) and idx.step == 1:
        cut = slice(idx.start, idx.stop)
        return Series(
            name=series.name,
            tags=series.tags,
            steps=series.steps[cut],
            values=series.values[cut],
            times=series.times[cut],
            attempts=series.attempts[cut],
            ranks=series.ranks[cut],
        )
    idx = list(idx)
    return Series(
        name=series.name,
        tags=series.tags,
        steps=[series.steps[i] for i in idx],
        values=[series.values[i] for i in idx],
        times=[series.times[i] for i in idx],
        attempts=[series.attempts[i] for i in idx],
        ranks=[series.ranks[i] for i in idx],
    )


_ranks_cache: dict[int, tuple[Series, int, set[int]]] = {}


def _ranks(series: Series) -> list[int]:
    """The ranks that wrote ``series``, scanned incrementally (series only grow)."""
    cached = _ranks_cache.get(id(series))
    start, seen = (cached[1], cached[2]) if cached and cached[0] is series else (0, set())
    if start > len(series.ranks):
        start, seen = 0, set()
    ranks = series.ranks
    if isinstance(ranks, array) and len(ranks) - start > 1000:
        try:
            import numpy as np

            new = np.frombuffer(ranks, dtype=ranks.typecode)[start:]
            lo, hi = int(new.min()), int(new.max())  # one rank, the common case: no sort
            seen |= {lo} if lo == hi else {int(r) for r in np.unique(new)}
        except ImportError:
            seen |= set(ranks[start:])
    else:
        seen |= set(ranks[start:])
    if len(_ranks_cache) > 10_000:
        _ranks_cache.clear()
    _ranks_cache[id(series)] = (series, len(series.ranks), seen)
    return sorted(seen)


def by_rank(series: Series) -> list[tuple[int, Series]]:
    """``series`` split per writing rank (one part, the series itself, when one rank wrote it)."""
    ranks = _ranks(series)
    if len(ranks) <= 1:
        return [(ranks[0] if ranks else 0, series)]
    return [(r, subset(series, [i for i, x in enumerate(series.ranks) if x == r])) for r in ranks]
