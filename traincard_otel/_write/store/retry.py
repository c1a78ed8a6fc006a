"""When the store writer tries the store again after a failed write.

The schedule is fixed and documented: after the n-th failure in a row the writer waits
``BACKOFF_S[n-1]`` seconds (1, 2, 4, 8, 16, then 30 s for as long as the store stays down) before its
next attempt. Records keep arriving meanwhile and wait in memory up to the writer's ``max_pending``
rows (beyond that they are dropped and counted as ``buffer_full``). The first write that succeeds
ends the backoff and flushes everything that waited, oldest first. An explicit flush
(``traincard_otel.flush()``, ``close()``, SIGTERM) always tries at once.

Each attempt is itself bounded by the backend (see :mod:`..._store.backends`): one try with short timeouts,
never the datastore client's own long retry loops, so a write against a dead endpoint gives up in
seconds and the writer's thread is free again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

BACKOFF_S: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


class Backoff:
    """Failures in a row and when the next attempt is due; not thread-safe (the writer's thread)."""

    def __init__(
        self, schedule: Sequence[float] = BACKOFF_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.schedule = tuple(schedule)
        self.clock = clock
        self.failures = 0
        self.next_at = 0.0

    @property
    def retrying(self) -> bool:
        """True from a failed write until the next write that succeeds."""
        return self.failures > 0

    def delay_s(self) -> float:
        """The wait after the current run of failures (0 when the last write succeeded)."""
        if not self.failures:
            return 0.0
        return self.schedule[min(self.failures, len(self.schedule)) - 1]

    def failed(self) -> None:
        self.failures += 1
        self.next_at = self.clock() + self.delay_s()

    def succeeded(self) -> None:
        self.failures = 0
        self.next_at = 0.0

    def due(self) -> bool:
        """Whether a scheduled (not explicit) attempt may run now."""
        return self.clock() >= self.next_at
