"""Per-step rows as the converter batches them: column by column, never one dict per row.

A batch becomes the body of one log event (``docs/schema.md``): plain lists, so every OTel
exporter can encode it, and the store exporter turns each run into a packed store record without
touching a row (:mod:`traincard_otel._store.segment`). :func:`metric_columns` and
:func:`step_columns` take a stretch of reports column by column when every report is the common
case; anything else goes row by row (:mod:`.rows`), and a test holds both paths to one output.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import NamedTuple, cast

from opentelemetry.util.types import AnyValue

from ..._schema import STEP_PARTS, MetricsReport, StepEnd
from ..._types import Reported

NAN = math.nan  # a duration or wait that was not measured
WIDTH = len(STEP_PARTS)  # seconds per step in the anatomy's row-major ``parts`` column
NO_PARTS = (NAN,) * WIDTH


class MetricRun:
    """Consecutive metric rows sharing a phase, names and tags; values row-major."""

    __slots__ = ("names", "phase", "steps", "tags", "times", "values")

    def __init__(self, phase: str | None, names: tuple[str, ...], tags: dict[str, str] | None) -> None:
        self.phase, self.names, self.tags = phase, names, tags
        self.steps: list[int | None] = []
        self.times: list[float] = []
        self.values: list[float] = []

    def add(self, t: float, step: int | None, values: Iterable[float]) -> None:
        self.times.append(t)
        self.steps.append(step)
        self.values.extend(values)

    def body(self) -> dict[str, AnyValue]:
        out: dict[str, AnyValue] = {
            "phase": self.phase,
            "names": list(self.names),
            "steps": self.steps,
            "times": self.times,
            "values": self.values,
        }
        if self.tags:
            out["tags"] = self.tags
        return out


class StepColumns:
    """Step ends: NaN where a duration or wait was not measured, 0 where samples or tokens were not;
    ``parts``, when any step carried its anatomy, ``WIDTH`` seconds per step (row-major, NaN where
    not measured), else empty."""

    __slots__ = ("durations", "parts", "samples", "steps", "times", "tokens", "waits")

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.times: list[float] = []
        self.durations: list[float] = []
        self.waits: list[float] = []
        self.samples: list[int] = []
        self.tokens: list[int] = []
        self.parts: list[float] = []

    def add(
        self,
        t: float,
        step: int,
        duration: float,
        wait: float,
        samples: int,
        tokens: int,
        parts: tuple[float, ...] | None = None,
    ) -> None:
        self._add_parts(parts, 1)
        self.steps.append(step)
        self.times.append(t)
        self.durations.append(duration)
        self.waits.append(wait)
        self.samples.append(samples)
        self.tokens.append(tokens)

    def _add_parts(self, parts: Sequence[float] | None, rows: int) -> None:
        """The anatomy of the next ``rows`` steps (``parts`` row-major), NaN-filled on whichever
        side has none, so the column stays ``WIDTH`` per step once any step has one."""
        if parts is None:
            if self.parts:
                self.parts.extend(NO_PARTS * rows)
            return
        if not self.parts and self.steps:
            self.parts.extend(NO_PARTS * len(self.steps))
        self.parts.extend(parts)

    def extend(
        self,
        times: list[float],
        steps: list[int],
        durations: list[float],
        waits: list[float],
        samples: list[int],
        tokens: list[int],
        parts: list[float] | None = None,
    ) -> None:
        self._add_parts(parts, len(steps))
        self.steps.extend(steps)
        self.times.extend(times)
        self.durations.extend(durations)
        self.waits.extend(waits)
        self.samples.extend(samples)
        self.tokens.extend(tokens)

    def __len__(self) -> int:
        return len(self.steps)

    def body(self) -> dict[str, AnyValue]:
        out: dict[str, AnyValue] = {
            "steps": self.steps,
            "times": self.times,
            "durations": self.durations,
            "waits": self.waits,
            "samples": self.samples,
            "tokens": self.tokens,
        }
        if self.parts:
            out["parts"] = self.parts
        return out


_FLOAT = {float}
_INT = {int}
_INT_OR_NONE = {int, type(None)}
_FLOAT_OR_NONE = {float, type(None)}
_NONE = {type(None)}


class MetricStretch(NamedTuple):
    times: list[float]
    steps: list[int | None]
    phase: str | None
    names: tuple[str, ...]
    values: list[float]  # row-major
    last: dict[str, float]  # the last report's values


class StepStretch(NamedTuple):
    times: list[float]
    steps: list[int]
    durations: list[float]
    wait_col: list[float]  # NaN where not measured
    samples: list[int]
    tokens: list[int]
    waits: list[float | None]  # None where not measured
    parts: list[float] | None  # WIDTH per step, row-major; None when no step carried its anatomy


def metric_columns(
    items: Sequence[MetricsReport], run: MetricRun | None, known: dict[str, float]
) -> MetricStretch | None:
    """Metric reports as columns; None unless every report has the same names, known already (the
    open run's, or seen before), finite float values, an int step or none, one phase and no tags."""
    if not items:
        return None
    times, steps, phases, reports, tags = zip(*items, strict=True)
    first = reports[0]
    names = tuple(first)
    if (
        not names
        or tags.count(None) != len(tags)
        or phases.count(phases[0]) != len(phases)
        or set(map(len, reports)) != {len(names)}  # with the lookups below: the same names
        or not ((run is not None and run.names == names) or known.keys() >= first.keys())
        or not set(map(type, steps)) <= _INT_OR_NONE
    ):
        return None
    try:  # each report's values in the order of the first one's names
        if len(names) == 1:
            values = list(map(operator.itemgetter(names[0]), reports))
        else:
            values = list(chain.from_iterable(map(operator.itemgetter(*names), reports)))
    except KeyError:
        return None
    if list(map(type, values)).count(float) != len(values) or not math.isfinite(sum(values)):
        return None
    return MetricStretch(list(times), list(steps), phases[0], names, values, reports[-1])


def step_columns(items: Sequence[StepEnd]) -> StepStretch | None:
    """Step ends as columns; None unless every step end has an int step, a positive float
    duration, a float wait or none, and int counts or none."""
    if not items:
        return None
    times, steps, durations, samples, tokens, waits, anatomy = zip(*items, strict=True)
    if set(map(type, steps)) != _INT or set(map(type, durations)) != _FLOAT or min(durations) <= 0:
        return None
    readable, parts = part_columns(anatomy)
    if not readable:
        return None
    if not (set(map(type, samples)) | set(map(type, tokens))) <= _INT_OR_NONE:
        return None  # counts that are not ints: checked row by row
    n = len(items)
    wait_types = set(map(type, waits))
    measured: list[float | None]
    if wait_types == _NONE:  # no wait measured (the common case: filled, not looped over)
        measured, wait_col = [None] * n, [NAN] * n
    elif wait_types == _FLOAT and min(waits) >= 0:
        wait_col = list(waits)
        measured = list(waits)
    elif wait_types <= _FLOAT_OR_NONE:
        measured = [w if w is not None and w >= 0 else None for w in waits]
        wait_col = [NAN if w is None else w for w in measured]
    else:
        return None
    n_col, tok_col = _counts(samples, n), _counts(tokens, n)
    if min(n_col) < 0 or min(tok_col) < 0:
        return None
    return StepStretch(list(times), list(steps), list(durations), wait_col, n_col, tok_col, measured, parts)


def _counts(counts: Sequence[int | None], n: int) -> list[int]:
    """Samples or tokens of ``n`` steps as a column: 0 where not counted."""
    if counts.count(None) == n:
        return [0] * n
    return [x or 0 for x in counts] if None in counts else list(cast("Sequence[int]", counts))


def read_parts(parts: Reported) -> Reported:
    """A step end's anatomy as seconds: a clock that timed a device gives them now (off the
    training thread); a tuple is as the training thread made it."""
    if parts is None or type(parts) is tuple:
        return parts
    seconds = getattr(parts, "seconds", None)
    return tuple(seconds()) if callable(seconds) else parts


def part_columns(anatomy: Sequence[Reported]) -> tuple[bool, list[float] | None]:
    """(readable, the steps' anatomies as one row-major column): NaN for a step without one, None
    when no step carried one; not readable when one is not ``WIDTH`` floats (checked row by row)."""
    if anatomy.count(None) == len(anatomy):
        return True, None
    read = [NO_PARTS if p is None else read_parts(p) for p in anatomy]
    if set(map(type, read)) != {tuple} or set(map(len, read)) != {WIDTH}:
        return False, None
    flat = list(chain.from_iterable(read))
    if set(map(type, flat)) != _FLOAT or any(v < 0 for v in flat):
        return False, None
    return True, flat
