"""System, GPU and health telemetry (psutil, NVML, watchdog), profile captures on demand
(:mod:`.profiler`) and the CUDA memory history (:mod:`.memory_history`); nothing heavy is imported
here."""

from __future__ import annotations

from ._samples import Sample, Snapshot, rates
from .instruments import register_system_instruments
from .sampler import SystemSampler

__all__ = ["Sample", "Snapshot", "SystemSampler", "rates", "register_system_instruments"]
