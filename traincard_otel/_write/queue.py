"""The hand-over between the training thread and the converter: a bounded queue of typed reports.

The training thread appends :mod:`.._schema` reports and sets plain fields (step, heartbeat,
progress); the converter's thread drains the queue. A ``collections.deque`` append is atomic in
CPython, so nothing here takes a lock. Every :class:`~traincard_otel.Reporter` handle of a process
writes into the one queue its pipeline owns.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Iterable

from .._schema import Report, SourcedReport
from .._types import Reported

#: Returns the (values, step, phase) reports a framework recorded since its last call, in order.
MetricSource = Callable[[], Iterable[SourcedReport]]


class ReportQueue:
    """Reports waiting for the converter, and the run's progress as the training thread sees it."""

    def __init__(self, cap: int = 200_000, *, report_metrics: bool = True) -> None:
        self.cap = cap
        self.report_metrics = report_metrics  # rank 0 only, unless TRAINCARD_REPORT_RANKS=all
        self.items: collections.deque[Report] = collections.deque()
        self.overflow = 0  # reports dropped because the queue was full
        self.step: int | None = None
        self.heartbeat_at: float = time.time()
        self.progress: dict[str, Reported] = {}
        self.metric_sources: tuple[MetricSource, ...] = ()
        self.open_phases: list[tuple[int, str]] = []  # (token, name), innermost last
        self.phase_tokens = itertools.count(1)
        self.perf_to_wall = 0.0
        # time.perf_counter() at the last step end, phase start or phase end: where the time of a
        # step ended without a duration starts
        self.step_clock = time.perf_counter()
        # texts that logging records brought lately: console capture skips their printed copies
        self.recent_messages: collections.deque[str] = collections.deque(maxlen=64)
        self.sync_clocks()

    def put(self, item: Report) -> None:
        if len(self.items) < self.cap:
            self.items.append(item)
        else:
            self.overflow += 1

    def drain(self) -> list[Report]:
        """Take everything queued so far (the converter's thread)."""
        q, out = self.items, []
        while q:
            out.append(q.popleft())
        return out

    def sync_clocks(self) -> None:
        """Re-read how far the wall clock is from ``time.perf_counter()`` (for ``step_end(at=)``;
        the converter calls it at every drain, so a wall-clock step is caught up there)."""
        self.perf_to_wall = time.time() - time.perf_counter()
