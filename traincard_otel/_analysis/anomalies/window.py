"""A rolling window of a metric's last values, with its median and median absolute deviation."""

from __future__ import annotations

import bisect
import collections
from typing import Final

MAD_SCALE: Final = 1.4826  # MAD x this estimates the standard deviation of normally distributed noise


class RollingWindow:
    """The last ``size`` values in arrival order and sorted (median in O(1), update in O(size) memmove)."""

    __slots__ = ("_order", "mad", "mad_age", "sorted")

    def __init__(self, size: int) -> None:
        self._order: collections.deque[float] = collections.deque(maxlen=size)
        self.sorted: list[float] = []
        self.mad: float | None = None  # cached; recomputed every few values and before a verdict
        self.mad_age = 0

    def __len__(self) -> int:
        return len(self.sorted)

    def add(self, value: float) -> None:
        order = self._order
        if len(order) == order.maxlen:
            old = order[0]
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        order.append(value)
        bisect.insort(self.sorted, value)
        self.mad_age += 1

    def extend(self, values: list[float]) -> None:
        """:meth:`add` each of ``values``, in one sort."""
        self._order.extend(values)
        self.sorted = sorted(self._order)
        self.mad_age += len(values)

    def median(self) -> float:
        s, n = self.sorted, len(self.sorted)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

    def fresh_mad(self) -> float:
        med = self.median()
        dev = sorted(abs(v - med) for v in self.sorted)
        n = len(dev)
        self.mad = dev[n // 2] if n % 2 else (dev[n // 2 - 1] + dev[n // 2]) / 2
        self.mad_age = 0
        return self.mad
