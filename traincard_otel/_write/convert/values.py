"""Reported values as the converter stores them: numbers as floats, steps as ints, the rest
rejected and counted by reason (never raised into training, never dropping a valid neighbour)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ..._safety import warn_once
from ..._text import encodable
from ..._types import Reported


def to_float(value: object) -> float | None:
    """A reported value as a float, or None if it is not a number (tensors, numpy included).

    An int too large for a float (``10**400``) or an object whose ``__float__``/``item()`` raises
    is not a number.
    """
    if type(value) is float:
        return value
    try:
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, (int, float)):
            return float(value)
        item = getattr(value, "item", None)
        if callable(item):
            out = item()
            return float(out) if isinstance(out, (int, float)) else None
    except Exception:  # whatever a user object raises, it is not a number we can store
        return None
    return None


def safe_value(value: Reported) -> Reported:
    """An attribute or body value with every string in it made :func:`encodable`."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable(str(k)): safe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_value(v) for v in value]
    return value


def as_step(value: object) -> int | None:
    """A reported step as an int (numpy and tensor scalars included), or None if it is not one."""
    f = to_float(value)
    return int(f) if f is not None and math.isfinite(f) else None


def dir_size(path: str) -> int | None:
    """Bytes under ``path`` (a file or a folder), or None if it is not there."""
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        total = 0
        for dirpath, _dirs, files in os.walk(path):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(dirpath, f))
                except OSError:
                    continue
        return total if os.path.isdir(path) else None
    except OSError:
        return None


MAX_NAME_CHARS = 256
MAX_METRIC_NAMES = 1000  # distinct names per process: each is a series and a chart


class Rejections:
    """Counts of rejected values by reason; the first of each reason is logged once."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def reject(self, reason: str, message: str, *args: object) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        warn_once(
            f"reject:{reason}", "traincard: " + message + " (reported once; later ones are counted)", *args
        )

    def clean(
        self, values: Mapping[object, object], step: int | None, known: Mapping[str, float] | None = None
    ) -> dict[str, float]:
        """The valid values of a report as floats; the rest is rejected and counted by reason.

        ``known``: the names seen so far; a new name beyond ``MAX_METRIC_NAMES`` is rejected.
        """
        clean: dict[str, float] = {}
        for name, raw in values.items():
            if not isinstance(name, str) or not name.strip():
                self.reject("bad_name", "metric names must be non-empty strings; got %r", name)
                continue
            if len(name) > MAX_NAME_CHARS:
                self.reject(
                    "name_too_long",
                    "metric name of %d characters (at most %d); value dropped",
                    len(name),
                    MAX_NAME_CHARS,
                )
                continue
            name = encodable(name)
            if known is not None and name not in known and len(known) + len(clean) >= MAX_METRIC_NAMES:
                self.reject(
                    "too_many_names", "more than %d distinct metric names; %r dropped", MAX_METRIC_NAMES, name
                )
                continue
            value = to_float(raw)
            if value is None:
                self.reject(
                    f"not_a_number:{name[:200]}",
                    "metric %r is not a number (%s); value dropped",
                    name[:200],
                    type(raw).__name__,
                )
                continue
            if not math.isfinite(value):
                warn_once(
                    f"nonfinite:{name[:200]}",
                    "traincard: metric %r is %s at step %s (recorded)",
                    name[:200],
                    value,
                    step,
                )
            clean[name] = value
        return clean

    def measure(self, value: object, field: str) -> float | None:
        """A step end's time in seconds as a float; None (not measured) if it is not a number."""
        f = to_float(value)
        if f is None:
            self.reject(
                f"bad_{field}", "step_end(%s=%r) is not a number of seconds; not measured", field, value
            )
        return f

    def count(self, value: object, field: str) -> int:
        """A step end's sample or token count as an int; 0 (not counted) if it is not a count."""
        if value is None:
            return 0
        f = to_float(value)
        if f is None or not math.isfinite(f) or f < 0:
            self.reject(f"bad_{field}", "step_end(%s=%r) is not a count; not counted", field, value)
            return 0
        return int(f)
