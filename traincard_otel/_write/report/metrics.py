"""The calls a training loop makes at every step: metrics, step ends, progress and heartbeats.

They are the hot path: each appends a typed report (:mod:`traincard_otel._schema`) to the queue or
sets a plain field of it, and nothing else (no lock, no I/O, no OpenTelemetry call). The converter's
thread does the rest. :class:`~.reporter.Reporter` is built on :class:`MetricReporting`.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..._safety import warn_once
from ..._schema import MetricsReport, Report, StepEnd
from ..._types import Reported
from ..queue import MetricSource, ReportQueue

if TYPE_CHECKING:
    from ..pipeline.guards import Guards


class MetricReporting:
    """The per-step reporting calls of :class:`~.reporter.Reporter`, over the state it attaches:
    the pipeline's queue (a queue that keeps nothing where telemetry is off)."""

    _queue: ReportQueue
    _q: collections.deque[Report]  # the queue's items, appended to directly on the hot path
    _cap: int
    _on: bool  # telemetry is on
    _report_metrics: bool  # this rank reports training metrics (``report_ranks``)
    _nonfinite: Guards | None  # set where stop_on names nan: floats are checked on this thread

    def metric(
        self, name: str, value: Reported, step: int | None = None, tags: Mapping[str, str] | None = None
    ) -> None:
        """Report one scalar (a float, int, 0-d tensor or numpy scalar) at ``step``.

        Without ``step``, the scalar belongs to the step the reporter is at. Bad values
        (NaN/inf are recorded; non-numbers, empty names and non-string tags are rejected and
        counted) are reported once in the log and never raise into the training loop.
        """
        if self._report_metrics:
            q = self._queue
            if step is None:
                step = q.step
            else:
                q.step = step
            q.put(MetricsReport(time.time(), step, None, {name: value}, tags))
            # (NaN and infinity minus themselves are NaN, which is true; a finite float gives 0.0)
            if self._nonfinite is not None and isinstance(value, float) and value - value:
                self._nonfinite.nonfinite(name, value, step, None, tags)

    def metrics(
        self,
        values: Mapping[str, Reported],
        step: int | None = None,
        phase: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Report several scalars logged together at one step (the hot-path form)."""
        if self._report_metrics:
            q = self._queue
            if step is None:
                step = q.step
            else:
                q.step = step
            # put() inlined in the per-step calls: on a step's cold caches each call layer costs µs
            if len(self._q) < self._cap:
                self._q.append(MetricsReport(time.time(), step, phase, dict(values), tags))
            else:
                q.overflow += 1
            if self._nonfinite is not None:
                self._nonfinite.reported(values, step, phase, tags)

    def add_metric_source(self, source: MetricSource) -> None:
        """Read metrics that a framework records anyway, off the training thread.

        ``source()`` is called on the background thread before each drain (and on the caller's
        thread in :meth:`flush`); it must be safe to call while training goes on. Each report it
        returns is timed at the end of its step when that step end was reported, else when read.
        """
        if self._report_metrics:
            self._queue.metric_sources = (*self._queue.metric_sources, source)

    def remove_metric_source(self, source: MetricSource) -> None:
        """Stop reading ``source`` (a bound method is matched by equality: each access is a new one)."""
        self._queue.metric_sources = tuple(s for s in self._queue.metric_sources if s != source)

    def step_end(
        self,
        step: int,
        duration_s: float | None = None,
        samples: int | None = None,
        tokens: int | None = None,
        data_wait_s: float | None = None,
        epoch: float | None = None,
        at: float | None = None,
        parts: Reported = None,
    ) -> None:
        """Mark an optimizer step as done: progress, step time, throughput and the time spent
        waiting for data (every rank; the card flags input-bound training from it), and the
        epoch (fractional) if known.

        Without ``duration_s``, the step's time is measured: the time since the previous
        ``step_end``, or since the latest phase start or end if one came after it (the first
        step's time counts from the phase it runs in, or from the reporter's start outside any
        phase). So an evaluation or a save in its own phase between two steps is not counted as
        the next step's time, while anything else the loop does between steps is (as a step time
        measured around the whole loop body would count it). Open ``reporter.phase("train")``
        where training starts, so the first step does not count the set-up before it.

        ``at``: when the step ended, by ``time.perf_counter()``, if the caller has read it (it
        spares the training thread a clock read).

        ``parts``: the step's anatomy (seconds of data, forward, backward, optimizer and
        communication; NaN where not measured) when the caller took it; without it, the parts
        the installed hooks timed since the previous step end (``Reporter.part_clock``)."""
        if self._on:
            q = self._queue
            # One clock read: the wall clock is the perf counter plus an offset the converter
            # re-reads at every drain (a cold wall-clock read costs about 1 µs on a step's caches).
            try:
                end = time.perf_counter() if at is None else at + 0.0
                now = end + q.perf_to_wall
            except TypeError:
                warn_once(
                    "step_end.at",
                    "traincard: step_end(at=%r) is not a time.perf_counter() reading; "
                    "the wall clock's time is used (reported once)",
                    at,
                )
                end, now = time.perf_counter(), time.time()
            clock = q.parts
            if parts is None and clock is not None:
                parts = clock.take(q.step_clock, data_wait_s)
            if duration_s is None:
                duration_s = end - q.step_clock
            q.step_clock = end
            q.step = step
            q.heartbeat_at = now
            if epoch is not None:
                q.progress["epoch"] = epoch
            if len(self._q) < self._cap:
                self._q.append(StepEnd(now, step, duration_s, samples, tokens, data_wait_s, parts))
            else:
                q.overflow += 1
            if q.profile is not None:  # a profile capture starts, steps or stops at this boundary
                q.profile.boundary()

    def progress(self, **fields: Reported) -> None:
        """Update status fields: ``step``, ``epoch``, ``max_steps``, ``num_epochs``,
        ``batch_size``, ``world_size`` (shown in the card's status panel, used for the ETA);
        ``flops_per_token`` and ``peak_flops`` (the model's FLOPs per trained token and one
        accelerator's peak FLOP/s: the card's MFU, where no model was handed to ``instrument()``)."""
        if self._on:
            if fields.get("step") is not None:
                self._queue.step = fields["step"]
            self._queue.progress.update(fields)

    def heartbeat(self) -> None:
        """Say that this rank is alive (every rank should call it, or report steps)."""
        self._queue.heartbeat_at = time.time()
