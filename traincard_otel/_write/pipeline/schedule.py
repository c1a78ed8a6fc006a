"""The pipeline's flush schedule: one thread that drives the data down the pipeline.

Every tick it drains the converter (reports -> OTel signals -> exporters), emits the rank's status
and asks the store writer to write. Nothing lower in the pipeline drains or flushes on its own
initiative, so data flows one way and the schedule is owned in one place. A tick touches only
memory and the OTel SDK (the store writer does its I/O on its own thread), so a stuck datastore
never stops the OTLP stream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..._safety import internal_error


class FlushSchedule:
    """Calls ``tick`` every ``period_s`` seconds on a daemon thread until stopped."""

    def __init__(self, tick: Callable[[], None], period_s: float) -> None:
        self._tick, self.period_s = tick, period_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traincard-schedule", daemon=True)

    def start(self) -> FlushSchedule:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self._wake.wait(self.period_s)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self._tick()
            except Exception as exc:
                internal_error("flush schedule", exc)

    def wake(self) -> None:
        """Tick now rather than at the end of the period (news that must reach the store soon)."""
        self._wake.set()

    def stop(self, timeout_s: float) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
