"""A summary made as the rows go by: what one writer keeps of what its converter saw.

:class:`SummaryTally` is fed the metric rows a process reports (a run of rows at a time, values
row-major, as the converter batches them) and its ``traincard.hyperparams`` events, and gives the
same :class:`~.summary.TaskSummarySection` that :func:`~.summary.task_summary` makes of a read store:
the final and best value of each untagged metric, the hyperparameters merged, and the main
metric's curve as at most :data:`~.summary.CURVE_POINTS` bucket means. Memory stays bounded: a
curve is kept as at most twice that many buckets of equal size, two neighbours merged whenever
they fill up, so its buckets hold equal shares of the points up to the last one (the read-time
curve cuts the whole series into equal shares, which this can only do once the series ended).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from .._schema.keys import is_tagged
from .._types import JsonValue
from .baseline import main_metric
from .summary import (
    CURVE_POINTS,
    MAX_METRICS,
    SUMMARY_VERSION,
    Hyperparameter,
    MetricSummarySection,
    TaskSummarySection,
    finite_extreme,
    format_curve,
    higher_is_better,
    hyperparameter_value,
)

MAX_NAMES: Final = 1000  # names kept (the converter accepts no more distinct ones)
MAX_CURVES: Final = 64  # names with a curve kept: the first ones seen that could be the main metric


class CurveBuckets:
    """A series as at most ``2 x CURVE_POINTS`` buckets of ``size`` points each (the last one
    filling): the finite values' sum and count, and the step of the bucket's last point."""

    __slots__ = ("counts", "points", "size", "steps", "sums")

    def __init__(self) -> None:
        self.size = 1
        self.sums: list[float] = []
        self.counts: list[int] = []
        self.points: list[int] = []
        self.steps: list[int | float | None] = []

    def add(self, steps: Sequence[int | None], values: Sequence[float]) -> None:
        i, n = 0, len(values)
        while i < n:
            if not self.points or self.points[-1] >= self.size:
                if len(self.points) == 2 * CURVE_POINTS:
                    self._halve()
                if not self.points or self.points[-1] >= self.size:
                    self.sums.append(0.0)
                    self.counts.append(0)
                    self.points.append(0)
                    self.steps.append(None)
            chunk = values[i : i + self.size - self.points[-1]]
            total = sum(chunk)  # C speed; a NaN or inf anywhere makes it non-finite
            if math.isfinite(total):
                self.sums[-1] += total
                self.counts[-1] += len(chunk)
            else:
                finite = [v for v in chunk if math.isfinite(v)]
                self.sums[-1] += sum(finite)
                self.counts[-1] += len(finite)
            self.points[-1] += len(chunk)
            i += len(chunk)
            self.steps[-1] = steps[i - 1]

    def _halve(self) -> None:
        """Two full neighbours as one: the buckets double in size."""
        self.sums = [a + b for a, b in zip(self.sums[::2], self.sums[1::2], strict=True)]
        self.counts = [a + b for a, b in zip(self.counts[::2], self.counts[1::2], strict=True)]
        self.points = [a + b for a, b in zip(self.points[::2], self.points[1::2], strict=True)]
        self.steps = self.steps[1::2]
        self.size *= 2

    def curve(self) -> str:
        """At most ``CURVE_POINTS`` (step, mean) pairs, as :func:`~.summary.format_curve` writes them."""
        sums, counts, steps = list(self.sums), list(self.counts), list(self.steps)
        while len(sums) > CURVE_POINTS:
            pairs = range(0, len(sums), 2)
            sums = [sum(sums[k : k + 2]) for k in pairs]
            counts = [sum(counts[k : k + 2]) for k in pairs]
            steps = [steps[min(k + 1, len(steps) - 1)] for k in pairs]
        return format_curve(
            (step, total / count) for step, total, count in zip(steps, sums, counts, strict=True) if count
        )


class MetricTally:
    """One metric's last finite value and best one (by :func:`~.summary.higher_is_better`)."""

    __slots__ = ("best", "best_step", "higher", "last", "last_step", "points")

    def __init__(self, name: str) -> None:
        self.higher = higher_is_better(name)
        self.last: float | None = None
        self.last_step: int | None = None
        self.best: float | None = None
        self.best_step: int | None = None
        self.points = 0

    def add(self, steps: Sequence[int | None], values: Sequence[float]) -> None:
        self.points += len(values)
        last = next((i for i in range(len(values) - 1, -1, -1) if math.isfinite(values[i])), None)
        if last is None:
            return
        self.last, self.last_step = float(values[last]), steps[last]
        top = max(values) if self.higher else min(values)  # C speed; a NaN may hide the real extreme
        if math.isfinite(top):
            if self.best is not None and not (top > self.best if self.higher else top < self.best):
                return  # no better value: its place is not looked for
            i: int | None = values.index(top)
        else:
            i = finite_extreme(values, self.higher)
        if i is not None and (
            self.best is None or (values[i] > self.best if self.higher else values[i] < self.best)
        ):
            self.best, self.best_step = float(values[i]), steps[i]

    def summary(self) -> MetricSummarySection:
        return {
            "last": self.last,
            "last_step": self.last_step,
            "best": self.best,
            "best_step": self.best_step,
            "points": self.points,
        }


class SummaryTally:
    """What one writer's summary needs of its metric rows and hyperparameters (see the module)."""

    def __init__(self) -> None:
        self.metrics: dict[str, MetricTally] = {}
        self.curves: dict[str, CurveBuckets] = {}
        self.hyperparameters: dict[str, Hyperparameter] = {}
        self._first: str | None = None  # the first name in sort order: the main metric without a loss

    def _new_name(self, name: str) -> None:
        """Keep a curve for a new name if it could be the summary's main metric (a loss, as
        :func:`.baseline.main_metric` picks it, else the first name in sort order); the curve of a
        name that cannot be any more (the first in sort order until now, not a loss) is let go."""
        could_be_main = "loss" in name.lower()
        if self._first is None or name < self._first:
            before, self._first = self._first, name
            if before is not None and "loss" not in before.lower():
                self.curves.pop(before, None)  # a name after this one is never the first again
            could_be_main = True
        if could_be_main and len(self.curves) < MAX_CURVES:
            self.curves[name] = CurveBuckets()

    def add_run(self, names: Sequence[str], steps: Sequence[int | None], values: Sequence[float]) -> None:
        """A run of untagged metric rows: ``names``' values row-major, one row per step."""
        k = len(names)
        for j, name in enumerate(names):
            tally = self.metrics.get(name)
            if tally is None:
                if len(self.metrics) >= MAX_NAMES or is_tagged(name):
                    continue
                tally = self.metrics[name] = MetricTally(name)
                self._new_name(name)
            column = values[j::k] if k > 1 else values
            tally.add(steps, column)
            curve = self.curves.get(name)
            if curve is not None:
                curve.add(steps, column)

    def add_hyperparameters(self, body: Mapping[str, JsonValue]) -> None:
        """One ``traincard.hyperparams`` event's values (a later value of a name wins)."""
        for key, value in body.items():
            self.hyperparameters[str(key)] = hyperparameter_value(value)

    def summary(self) -> TaskSummarySection:
        """The metrics and hyperparameters so far; the writer adds its own fields (status, step,
        times, goodput ...)."""
        names = sorted(k for k, t in self.metrics.items() if t.points)[:MAX_METRICS]
        main = main_metric(names) or (names[0] if names else None)
        curve = self.curves.get(main) if main else None
        return {
            "v": SUMMARY_VERSION,
            "hyperparameters": dict(self.hyperparameters),
            "metrics": {k: self.metrics[k].summary() for k in names},
            "main": main,
            "higher_is_better": higher_is_better(main) if main else False,
            "curve": curve.curve() if curve is not None else "",
        }
