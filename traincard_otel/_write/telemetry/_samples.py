"""Sample records shared by the host and GPU samplers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..._schema import InstrumentKind, MetricSpec
from ..._schema.keys import reading_key

AttrValue = str | int | float | bool


@dataclasses.dataclass(frozen=True)
class Sample:
    """One figure under its semantic-convention name, unit, instrument kind and attributes."""

    name: str
    value: float
    unit: str
    kind: InstrumentKind
    attributes: Mapping[str, AttrValue] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> tuple[str, frozenset[tuple[str, AttrValue]]]:
        return self.name, frozenset(self.attributes.items())

    @property
    def reading_key(self) -> str:
        """How the reading is named in the run status (:func:`traincard_otel._schema.keys.reading_key`)."""
        return reading_key(self.name, self.attributes)


def sample(spec: MetricSpec, value: float, attributes: Mapping[str, AttrValue] | None = None) -> Sample:
    """One figure of the instrument ``spec`` (its name, unit and kind from the schema)."""
    return Sample(spec.name, value, spec.unit, spec.kind, attributes or {})


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything sampled at one moment."""

    time: float
    samples: tuple[Sample, ...]


def rates(prev: Snapshot, cur: Snapshot) -> dict[tuple[str, frozenset[tuple[str, AttrValue]]], float]:
    """Per-second rates of the cumulative counters between two snapshots (disk/network bytes, energy)."""
    dt = cur.time - prev.time
    if dt <= 0:
        return {}
    before = {s.key: s.value for s in prev.samples if s.kind == "counter"}
    out = {}
    for s in cur.samples:
        if s.kind == "counter" and s.key in before and s.value >= before[s.key]:
            out[s.key] = (s.value - before[s.key]) / dt
    return out
