"""The hand-over between the training thread and the converter: a bounded queue of typed reports.

The training thread appends :mod:`.._schema` reports and sets plain fields (step, heartbeat,
progress); the converter's thread drains the queue. A ``collections.deque`` append is atomic in
CPython, so nothing here takes a lock. Every :class:`~traincard_otel.Reporter` handle of a process
writes into the one queue its pipeline owns.
"""

from __future__ import annotations

import collections
import itertools
import math
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from .._schema import Report, SourcedReport
from .._types import Reported

#: Returns the (values, step, phase) reports a framework recorded since its last call, in order.
MetricSource = Callable[[], Iterable[SourcedReport]]

NAN = math.nan
#: One step's seconds per ``STEP_PARTS`` (data, forward, backward, optimizer, communication).
Parts = tuple[float, float, float, float, float]


class StepBoundary(Protocol):
    """Work the training thread does at a step end while asked (a profile capture)."""

    def boundary(self) -> None: ...


class PartClock:
    """The anatomy of the step under way, as the framework's hooks time it (``docs/architecture.md``,
    step anatomy): each hook reads ``time.perf_counter()`` into a plain attribute, and
    :meth:`take` hands the step's parts over at its end and starts the next. ``measured`` says which
    of ``STEP_PARTS`` the installed hooks time; the others are NaN (not measured).

    Backward and communication are marked by autograd callbacks, which may run on autograd's own
    thread; the training thread reads them after ``backward()`` has returned.
    """

    __slots__ = (
        "backward",
        "backward_at",
        "communication",
        "first_forward",
        "forward",
        "forward_at",
        "measured",
        "optimizer",
        "optimizer_at",
    )

    def __init__(self, measured: tuple[bool, bool, bool, bool, bool] = (True,) * 5) -> None:
        self.measured = measured
        self.forward = self.backward = self.optimizer = self.communication = 0.0
        self.forward_at = self.backward_at = self.optimizer_at = 0.0
        self.first_forward = 0.0  # when the step's first forward began (0: none yet)

    def begin_forward(self) -> None:
        self.forward_at = now = time.perf_counter()
        if not self.first_forward:
            self.first_forward = now

    def end_forward(self) -> None:
        if self.forward_at:
            self.forward += time.perf_counter() - self.forward_at
            self.forward_at = 0.0

    def begin_backward(self) -> None:
        if not self.backward_at:  # a second output of the same backward reached: it began already
            self.backward_at = time.perf_counter()

    def end_backward(self, collectives: bool = True) -> None:
        """Autograd's graph is done; what follows until :meth:`end_communication` is the wait for
        the gradients' collectives (DDP's and FSDP's own end-of-backward callbacks). Without
        ``collectives`` (no process group) there is none: the backward is over, communication 0."""
        if self.backward_at:
            now = time.perf_counter()
            self.backward += now - self.backward_at
            self.backward_at = now if collectives else 0.0

    def end_communication(self) -> None:
        if self.backward_at:
            self.communication += time.perf_counter() - self.backward_at
            self.backward_at = 0.0

    def begin_optimizer(self) -> None:
        self.optimizer_at = time.perf_counter()

    def end_optimizer(self) -> None:
        if self.optimizer_at:
            self.optimizer += time.perf_counter() - self.optimizer_at
            self.optimizer_at = 0.0

    def take(self, start: float, data_wait: float | None = None) -> Reported:
        """The parts of the step that began at ``start`` (a ``perf_counter()`` reading), and a
        fresh start. The data part is ``data_wait`` when the adapter measured it, else the time
        from ``start`` to the step's first forward. A :class:`Parts` tuple here; a clock timing a
        device returns an object whose ``seconds()`` reads them off the training thread."""
        m = self.measured
        if data_wait is None:
            first = self.first_forward
            data_wait = first - start if m[0] and first >= start else NAN
        parts: Parts = (
            data_wait,
            self.forward if m[1] else NAN,
            self.backward if m[2] else NAN,
            self.optimizer if m[3] else NAN,
            self.communication if m[4] else NAN,
        )
        self.forward = self.backward = self.optimizer = self.communication = self.first_forward = 0.0
        self.forward_at = self.backward_at = self.optimizer_at = 0.0  # nothing left open into the next step
        return parts


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
        # the step anatomy's clock, once an adapter installs its hooks (``Reporter.part_clock``)
        self.parts: PartClock | None = None
        # set while a profile capture is asked or under way: the one attribute checked per step
        self.profile: StepBoundary | None = None
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
        q = self.items
        # Only this thread takes from the left, so the first len(q) are there to take: popped by
        # a loop in C rather than one in Python per report.
        return list(itertools.starmap(q.popleft, itertools.repeat((), len(q))))

    def sync_clocks(self) -> None:
        """Re-read how far the wall clock is from ``time.perf_counter()`` (for ``step_end(at=)``;
        the converter calls it at every drain, so a wall-clock step is caught up there)."""
        self.perf_to_wall = time.time() - time.perf_counter()
