"""The system sampler: one background thread reading host and GPU figures every interval.

Default interval 2 s: the live card refreshes every few seconds, so a fresher sample would not be
seen, and a sample (psutil + NVML for a few GPUs) costs about a millisecond of CPU, i.e. well under
0.1 % of one core at this period (``benchmarks/bench_system_sampler.py`` measures it).
Only local rank 0 of each node samples (decided by the caller), so a node is reported once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..._safety import report_internal_error
from ..._types import Foreign
from ._samples import Snapshot
from .gpu import GpuSampler
from .host import HostSampler


class SystemSampler:
    """Samples every ``interval_s`` on a daemon thread; :meth:`latest` returns the last snapshot."""

    def __init__(self, interval_s: float = 2.0, *, gpu: bool = True, nvml: Foreign = None) -> None:
        self.interval_s = interval_s
        self.host = HostSampler()
        self.gpu = GpuSampler(nvml) if gpu else None
        self.errors: list[BaseException] = []
        self._latest: Snapshot | None = None
        self._listeners: list[Callable[[Snapshot], None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traincard-system", daemon=True)

    @property
    def notes(self) -> list[str]:
        return list(self.gpu.notes) if self.gpu is not None else []

    def add_listener(self, fn: Callable[[Snapshot], None]) -> None:
        self._listeners.append(fn)

    def open_gpus(self) -> bool:
        """Open NVML and pick the job's GPUs (once); whether there are GPU figures to read."""
        if self.gpu is None:
            return False
        self.gpu.start()
        return self.gpu.active

    def start(self) -> SystemSampler:
        self.open_gpus()
        self.sample_now()
        self._thread.start()
        return self

    def sample_now(self) -> Snapshot:
        now = time.time()
        samples = self.host.sample(now)
        if self.gpu is not None:
            samples.extend(self.gpu.sample())
        snap = Snapshot(now, tuple(samples))
        self._latest = snap
        for fn in self._listeners:
            fn(snap)
        return snap

    def latest(self) -> Snapshot | None:
        return self._latest

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample_now()
            except Exception as exc:
                if not self.errors:
                    report_internal_error("system sampler", exc)
                self.errors.append(exc)

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():  # else it may be reading them still
            self.host.close()
