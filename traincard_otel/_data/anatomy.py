"""One rank's step anatomy as read: each step's wall time and its seconds per part, bounded.

Plain data at the foundation, filled by the store's reader and read by the analysis
(:mod:`traincard_otel._analysis.anatomy`) and ``load().to_rows("anatomy")``. A long run keeps its
last ``KEEP`` steps whole and at most as many older ones, thinned evenly, so a rank's anatomy
never grows past ``2 * KEEP`` steps however long the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from .._schema import ANATOMY_PARTS, STEP_PARTS
from .._types import JsonValue

KEEP = 2000
WIDTH = len(STEP_PARTS)


def _seconds(value: JsonValue) -> float:
    """A stored figure as seconds: NaN where it is not a number that is at least 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value) if value >= 0 else math.nan


class StepParts:
    """One rank's timed steps with their anatomy (``STEP_PARTS`` seconds each, NaN where not
    measured); :meth:`other` is the rest of each step's wall time."""

    __slots__ = ("attempts", "durations", "parts", "seen", "steps", "times")

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.times: list[float] = []
        self.attempts: list[int] = []
        self.durations: list[float] = []
        self.parts: list[list[float]] = [[] for _ in STEP_PARTS]  # one column per part
        self.seen = 0  # steps added, including those thinned away

    def __len__(self) -> int:
        return len(self.steps)

    def add(
        self,
        steps: Sequence[JsonValue],
        times: Sequence[JsonValue],
        durations: Sequence[float],
        parts: Sequence[float],
        attempt: int,
    ) -> None:
        """Steps with a duration and at least one measured part (``parts`` row-major)."""
        for i, step in enumerate(steps):
            duration = _seconds(durations[i])
            row = [_seconds(v) for v in parts[i * WIDTH : i * WIDTH + WIDTH]]
            if type(step) is not int or not duration > 0 or len(row) != WIDTH or all(v != v for v in row):
                continue
            self.steps.append(step)
            self.times.append(_seconds(times[i]))
            self.attempts.append(attempt)
            self.durations.append(duration)
            for column, value in zip(self.parts, row, strict=True):
                column.append(value)
            self.seen += 1
        if len(self.steps) > 2 * KEEP:
            self._thin()

    def _thin(self) -> None:
        """Every other step older than the last ``KEEP``, until those older ones are ``KEEP``."""
        head = len(self.steps) - KEEP
        keep = list(range(head))
        while len(keep) > KEEP:
            keep = keep[::2]
        kept = keep + list(range(head, len(self.steps)))
        for name in ("steps", "times", "attempts", "durations"):
            column = getattr(self, name)
            setattr(self, name, [column[i] for i in kept])
        self.parts = [[column[i] for i in kept] for column in self.parts]

    def measured(self) -> tuple[bool, ...]:
        """Whether each of ``STEP_PARTS`` was measured at any step kept."""
        return tuple(any(v == v for v in column) for column in self.parts)

    def other(self, i: int) -> float:
        """Step ``i``'s wall time not in a measured part (never below 0)."""
        known = sum(column[i] for column in self.parts if column[i] == column[i])
        return max(self.durations[i] - known, 0.0)

    def row(self, i: int) -> dict[str, float]:
        """Step ``i``'s seconds by part name (``ANATOMY_PARTS``; NaN where not measured)."""
        out = {part: column[i] for part, column in zip(STEP_PARTS, self.parts, strict=True)}
        out[ANATOMY_PARTS[-1]] = self.other(i)
        return out

    def rows(self) -> Iterator[tuple[int, dict[str, float]]]:
        """``(step, seconds by part)`` for every step kept, oldest first."""
        for i, step in enumerate(self.steps):
            yield step, self.row(i)
