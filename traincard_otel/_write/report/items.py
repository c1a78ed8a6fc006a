"""Per-item figures of a loop that is not training: an evaluation or a batch-inference loop.

:class:`ItemMeter` takes one call per item (its latency, and for generation its tokens and time
to first token, or its error) and reports, every ``every`` items and at :meth:`~ItemMeter.close`,
the figures of the items since the last report as ordinary metric rows through the reporter it
was given (``Reporter.metrics``, at step = items done so far, in the reporter's current phase):

==========================  =====================================================================
``items_per_s``             items finished per second of wall time over the stretch
``latency_p50_s`` ... p99   latency percentiles of the stretch (nearest rank)
``errors``                  items that failed, in total so far
``bad_values``              items whose latency, tokens or TTFT was not a number >= 0 (when any)
``error_rate``              failed share of the stretch
``tokens_per_s``            generated tokens per second of wall time (generation only)
``ttft_p50_s``, ``p90``     time to first token percentiles of the stretch (generation only)
==========================  =====================================================================

:meth:`~ItemMeter.summary` gives the same over the whole loop, the percentiles from a uniform
sample of at most ``RESERVOIR`` latencies (bounded memory for a million items).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..._safety import warn_once

RESERVOIR = 10_000


class _Reports(Protocol):
    def metrics(
        self, values: Mapping[str, float], step: int | None = None, phase: str | None = None
    ) -> None: ...


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0-100) of non-empty ``sorted_values``."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


class ItemMeter:
    """Counts the items of an evaluation or inference loop and reports their figures.

    Made by :meth:`traincard_otel.Reporter.meter`; a context manager that reports what is left
    when it closes.
    """

    def __init__(
        self,
        reporter: _Reports,
        *,
        every: int = 50,
        phase: str | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1; got {every!r}")
        self._reporter, self._every, self.phase, self._clock = reporter, every, phase, clock
        self.items = self.errors = self.tokens = self.bad_values = 0
        self._reported = 0  # items at the last report
        self._started = self._since = clock()
        self._latencies: list[float] = []
        self._ttfts: list[float] = []
        self._errors = self._tokens = 0
        self._sample: list[float] = []
        self._ttft_sample: list[float] = []
        self._ttft_seen = 0
        self._rng = random.Random(0)

    def item(
        self,
        latency_s: float,
        *,
        tokens: int | None = None,
        ttft_s: float | None = None,
        error: BaseException | str | None = None,
    ) -> None:
        """One item done: its latency in seconds; for generation, the tokens generated and the time
        to the first one; ``error`` when it failed (its latency still counts).

        Never raises: a latency, token count or time to first token that is not a finite number
        >= 0 is left out of the figures and counted in ``bad_values`` (reported with them)."""
        self.items += 1
        latency = _finite(latency_s)
        count = _finite(tokens) if tokens is not None else 0.0
        ttft = _finite(ttft_s) if ttft_s is not None else None
        if latency is None or count is None or (ttft_s is not None and ttft is None):
            self.bad_values += 1
            warn_once(
                "item-meter", "traincard: item figures that are not numbers >= 0 are counted as bad_values"
            )
        if latency is not None:
            self._latencies.append(latency)
            self._keep(self._sample, latency, self.items)
        if error is not None:
            self.errors += 1
            self._errors += 1
        if count:
            self.tokens += int(count)
            self._tokens += int(count)
        if ttft is not None:
            self._ttfts.append(ttft)
            self._ttft_seen += 1
            self._keep(self._ttft_sample, ttft, self._ttft_seen)
        if self.items - self._reported >= self._every:
            self.report()

    def _keep(self, sample: list[float], value: float, seen: int) -> None:
        if len(sample) < RESERVOIR:
            sample.append(value)
        else:
            j = self._rng.randrange(seen)
            if j < RESERVOIR:
                sample[j] = value

    def report(self) -> None:
        """Report the items since the last report (nothing when there are none)."""
        n = self.items - self._reported
        if not n:
            return
        now = self._clock()
        elapsed = max(now - self._since, 1e-9)
        values = _figures(n, elapsed, self._latencies, self._errors, self._tokens, self._ttfts)
        values["errors"] = float(self.errors)
        if self.bad_values:
            values["bad_values"] = float(self.bad_values)
        self._reporter.metrics(values, step=self.items, phase=self.phase)
        self._since, self._reported = now, self.items
        self._latencies, self._ttfts = [], []
        self._errors = self._tokens = 0

    def __enter__(self) -> ItemMeter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> dict[str, float]:
        """Report what is left; returns :meth:`summary`."""
        self.report()
        return self.summary()

    def summary(self) -> dict[str, float]:
        """The figures of the whole loop so far (percentiles from a bounded uniform sample)."""
        elapsed = max(self._clock() - self._started, 1e-9)
        out = _figures(self.items, elapsed, self._sample, self.errors, self.tokens, self._ttft_sample)
        out["items"] = float(self.items)
        out["errors"] = float(self.errors)
        out["bad_values"] = float(self.bad_values)
        return out


def _finite(value: object) -> float | None:
    """``value`` as a finite float >= 0 (None: it is not one)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]  # a number, a numpy or torch scalar, or junk
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _figures(
    n: int, elapsed: float, latencies: list[float], errors: int, tokens: int, ttfts: list[float]
) -> dict[str, float]:
    out: dict[str, float] = {"items_per_s": n / elapsed, "error_rate": errors / n if n else 0.0}
    if latencies:
        lat = sorted(latencies)
        for q in (50, 90, 99):
            out[f"latency_p{q}_s"] = percentile(lat, q)
    if tokens:
        out["tokens_per_s"] = tokens / elapsed
    if ttfts:
        ttft = sorted(ttfts)
        out["ttft_p50_s"] = percentile(ttft, 50)
        out["ttft_p90_s"] = percentile(ttft, 90)
    return out
