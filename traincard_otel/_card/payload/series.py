"""Series for display: min/max downsampling, live tails, coarse heads, and splits at resumes.

Downsampling keeps the min and the max of each bucket, so spikes and extremes stay visible at any
run length; live payloads carry only each series' tail.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Iterable, Sequence
from typing import Literal

from ..._store.reader import Series

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


def downsample(xs: Sequence[float], ys: Sequence[float], max_points: int = MAX_POINTS) -> XY:
    """Keep the min and the max of each bucket, in x order (spikes survive any zoom level)."""
    n = len(xs)
    if n <= max_points:
        return list(xs), [_finite(y) for y in ys]
    try:
        import numpy as np
    except ImportError:  # numpy comes with pyarrow/torch; the pure-Python path is only slower
        return downsample_py(xs, ys, max_points)
    buckets = max_points // 2
    size = -(-n // buckets)
    y = np.full(buckets * size, np.nan)
    y[:n] = np.asarray(ys, dtype=float)
    y[~np.isfinite(y)] = np.nan
    grid = y.reshape(buckets, size)
    empty = np.isnan(grid).all(axis=1)
    filled = np.where(np.isnan(grid), np.inf, grid)
    lo = filled.argmin(axis=1)
    hi = np.where(np.isnan(grid), -np.inf, grid).argmax(axis=1)
    rows = np.arange(buckets) * size
    keep = np.unique(np.concatenate([(rows + lo)[~empty], (rows + hi)[~empty], rows[empty]]))
    keep = keep[keep < n]
    x_arr = np.asarray(xs)
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


def xy(series: Series, mode: Mode, by: Axis = "step", max_points: int = MAX_POINTS) -> XY:
    """The (x, y) a chart draws for ``series``: all of it downsampled (to ``max_points``), or its
    live tail."""
    xs_all = series.steps if by == "step" else series.times
    if mode.live:
        return _live_tail(series, xs_all, mode)
    if None not in xs_all:  # the common case, checked at C speed
        return downsample(xs_all, series.values, max_points)
    pairs = [(x, v) for x, v in zip(xs_all, series.values, strict=False) if x is not None]
    return downsample([p[0] for p in pairs], [p[1] for p in pairs], max_points)


def _live_tail(series: Series, xs_all: Sequence[float | None], mode: Mode) -> XY:
    """The points of the last ``LIVE_WINDOW_S`` seconds (at least ``mode.tail`` points), downsampled
    to ``mode.tail``: a viewer polling less often than we refresh still gets every stretch."""
    times = series.times
    newest = times[-1] if times else 0.0
    xs: list[float] = []
    ys: list[float] = []
    i = len(xs_all) - 1
    while i >= 0 and len(xs) < LIVE_SCAN_MAX and (len(xs) < mode.tail or times[i] >= newest - LIVE_WINDOW_S):
        x = xs_all[i]
        if x is not None:
            xs.append(x)
            ys.append(series.values[i])
        i -= 1
    xs.reverse()
    ys.reverse()
    return downsample(xs, ys, max_points=max(mode.tail, 4))


_head_cache: dict[tuple[int, str], tuple[Series, float, XY]] = {}


def head(series: Series, by: Axis) -> XY:
    """A coarse picture of the whole series, recomputed at most every ``HEAD_REFRESH_S``."""
    key = (id(series), by)
    cached = _head_cache.get(key)
    now = time.monotonic()
    if cached and cached[0] is series and now - cached[1] < HEAD_REFRESH_S:
        return cached[2]
    xs_all = series.steps if by == "step" else series.times
    pairs = [(x, v) for x, v in zip(xs_all, series.values, strict=False) if x is not None]
    out = downsample([p[0] for p in pairs], [p[1] for p in pairs], max_points=HEAD_POINTS)
    if len(_head_cache) > 10_000:
        _head_cache.clear()
    _head_cache[key] = (series, now, out)
    return out


_cuts_cache: dict[int, tuple[Series, int, list[int]]] = {}


def _cuts(series: Series) -> list[int]:
    """Indices where the step moves backwards, scanned incrementally (series only grow)."""
    cached = _cuts_cache.get(id(series))
    start, cuts = (cached[1], list(cached[2])) if cached and cached[0] is series else (0, [])
    steps = series.steps
    last = next((steps[i] for i in range(start - 1, -1, -1) if steps[i] is not None), None)
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


def stretches(series: Series, tail: int | None = None) -> list[tuple[int, Series]]:
    """Split where the step moves backwards (resume, retry): every stretch stays visible.

    With ``tail``, only the stretches (and points) among the last ``tail`` points are returned.
    """
    cuts = _cuts(series)
    if not cuts and tail is None:
        return [(0, series)]
    n_points = len(series.steps)
    bounds = [0, *cuts, n_points]
    out = []
    for n, (a, b) in enumerate(itertools.pairwise(bounds)):
        if tail is not None:
            if b <= n_points - tail:
                continue
            a = max(a, n_points - tail)
        out.append((n, subset(series, range(a, b))))
    return out


def subset(series: Series, idx: Iterable[int]) -> Series:
    """The points of ``series`` at the indices ``idx``."""
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


def by_rank(series: Series) -> list[tuple[int, Series]]:
    """``series`` split per writing rank (one part, the series itself, when one rank wrote it)."""
    ranks = sorted(set(series.ranks))
    if len(ranks) <= 1:
        return [(ranks[0] if ranks else 0, series)]
    return [(r, subset(series, [i for i, x in enumerate(series.ranks) if x == r])) for r in ranks]
