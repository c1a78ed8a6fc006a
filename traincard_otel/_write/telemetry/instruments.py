"""OTel observable instruments fed by the sampler's latest snapshot (no sampling at export time)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..._schema import GPU_PREFIXES, SYSTEM_METRICS
from .sampler import SystemSampler

# (name, kind, unit) of every system figure, from the wire schema (docs/schema.md).
SYSTEM_INSTRUMENTS: tuple[tuple[str, str, str], ...] = tuple((m.name, m.kind, m.unit) for m in SYSTEM_METRICS)


def _callback(sampler: SystemSampler, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        snap = sampler.latest()
        if snap is None:
            return []
        return [Observation(s.value, dict(s.attributes)) for s in snap.samples if s.name == name]

    return observe


def register_system_instruments(meter: Meter, sampler: SystemSampler) -> None:
    """Create one observable instrument per system figure, reading ``sampler.latest()``.

    GPU figures get instruments only if the sampler finds GPUs (it opens NVML here if it has not
    yet): every instrument costs the metric reader a callback at each collection, observations or
    not.
    """
    gpus = sampler.open_gpus()
    create: dict[str, Callable[..., object]] = {
        "gauge": meter.create_observable_gauge,
        "counter": meter.create_observable_counter,
        "updowncounter": meter.create_observable_up_down_counter,
    }
    for name, kind, unit in SYSTEM_INSTRUMENTS:
        if name.startswith(GPU_PREFIXES) and not gpus:
            continue
        create[kind](name, callbacks=[_callback(sampler, name)], unit=unit)
