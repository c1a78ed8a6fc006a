"""Sample records shared by the host and GPU samplers."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Literal

Kind = Literal["gauge", "counter", "updowncounter"]
AttrValue = str | int | float | bool


@dataclasses.dataclass(frozen=True)
class Sample:
    """One figure under its semantic-convention name, unit, instrument kind and attributes."""

    name: str
    value: float
    unit: str
    kind: Kind
    attributes: Mapping[str, AttrValue] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> tuple[str, frozenset[tuple[str, AttrValue]]]:
        return self.name, frozenset(self.attributes.items())

    @property
    def reading_key(self) -> str:
        """``"hw.errors[gpu0]{error.type=corrected}"``: how a reading is named in the run status
        (the device in brackets, descriptive attributes of the device left out)."""
        key = self.name
        hw_id = self.attributes.get("hw.id")
        other = [f"{k}={v}" for k, v in sorted(self.attributes.items()) if k not in _DEVICE_ATTRIBUTES]
        if hw_id is not None:
            key += f"[{hw_id}]"
        if other:
            key += "{" + ",".join(other) + "}"
        return key


_DEVICE_ATTRIBUTES = {"hw.id", "hw.name", "hw.vendor", "hw.type", "hw.gpu.task"}
_READING_KEY = re.compile(r"^([^\[{]+)(?:\[([^\]]*)\])?(?:\{(.*)\})?$")


def split_reading_key(key: str) -> tuple[str, str | None, dict[str, str]]:
    """The inverse of :attr:`Sample.reading_key`: ``(name, hw.id or None, other attributes)``."""
    m = _READING_KEY.match(key)
    if m is None:
        return key, None, {}
    attrs = dict(part.split("=", 1) for part in (m.group(3) or "").split(",") if "=" in part)
    return m.group(1), m.group(2), attrs


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
