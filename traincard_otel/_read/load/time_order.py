"""A time series in time order: sorted by time, one point per time and rank.

The writer stores each system sample once, in sampling order. This is the reader's and the
card's second line of defence against points stored out of order or twice all the same (stores
written before child processes were kept out of them, a writer restarted with an unsynchronised
clock): charts by time draw lines between consecutive points, so a stray one zigzags the chart.
"""

from __future__ import annotations

import itertools
import operator

from ..._data.rundata import Series


def in_time_order(series: Series, checked: int = 0) -> Series:
    """``series`` itself when its times increase strictly (from index ``checked`` on: the points
    before it were checked already), else a sorted copy keeping the first point of each
    (time, rank, attempt)."""
    times = series.times
    start = max(0, checked - 1)
    if all(map(operator.lt, itertools.islice(times, start, None), itertools.islice(times, start + 1, None))):
        return series
    keys = list(zip(times, series.ranks, series.attempts, strict=True))
    order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: the first of equals stays first
    keep = [i for n, i in enumerate(order) if n == 0 or keys[i] != keys[order[n - 1]]]
    return Series(
        name=series.name,
        tags=series.tags,
        steps=[series.steps[i] for i in keep],
        values=[series.values[i] for i in keep],
        times=[series.times[i] for i in keep],
        attempts=[series.attempts[i] for i in keep],
        ranks=[series.ranks[i] for i in keep],
    )
