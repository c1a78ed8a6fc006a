"""Per-step rows as the pump batches them: column by column, never one dict per row.

A batch becomes the body of one log event (``docs/schema.md``): plain lists, so every OTel
exporter can encode it, and the store exporter turns each run into a packed store record without
touching a row (:mod:`traincard_otel.store.segment`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

NAN = math.nan  # a duration or wait that was not measured


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

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
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
    """Step ends: NaN where a duration or wait was not measured, 0 where samples or tokens were not."""

    __slots__ = ("durations", "samples", "steps", "times", "tokens", "waits")

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.times: list[float] = []
        self.durations: list[float] = []
        self.waits: list[float] = []
        self.samples: list[int] = []
        self.tokens: list[int] = []

    def add(self, t: float, step: int, duration: float, wait: float, samples: int, tokens: int) -> None:
        self.steps.append(step)
        self.times.append(t)
        self.durations.append(duration)
        self.waits.append(wait)
        self.samples.append(samples)
        self.tokens.append(tokens)

    def extend(
        self,
        times: list[float],
        steps: list[int],
        durations: list[float],
        waits: list[float],
        samples: list[int],
        tokens: list[int],
    ) -> None:
        self.steps.extend(steps)
        self.times.extend(times)
        self.durations.extend(durations)
        self.waits.extend(waits)
        self.samples.extend(samples)
        self.tokens.extend(tokens)

    def __len__(self) -> int:
        return len(self.steps)

    def body(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "times": self.times,
            "durations": self.durations,
            "waits": self.waits,
            "samples": self.samples,
            "tokens": self.tokens,
        }
