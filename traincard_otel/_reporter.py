"""The framework-agnostic reporting API. Everything here runs on the training thread.

Each call only appends a typed report (:mod:`._schema`) to the pipeline's bounded queue or sets a
plain field: no locks held across I/O, no OpenTelemetry calls, no validation beyond what is free.
The converter's thread turns the queue into OTel signals.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

from . import _pipeline
from ._config import Settings
from ._insights.items import ItemMeter
from ._queue import MetricSource, PartClock, ReportQueue
from ._safety import warn_once
from ._schema import (
    CheckpointSaved,
    Hyperparameters,
    LifecycleEvent,
    LogLine,
    MetricsReport,
    PhaseEnd,
    PhaseStart,
    StepEnd,
    SystemReport,
)
from ._types import Reported

_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


class Phase:
    """A training phase (``train``, ``eval``, ``save`` ...); a span in the OTel stream.

    Use as a context manager, or call :meth:`end` yourself.
    """

    __slots__ = ("_ended", "_queue", "name", "token")

    def __init__(self, queue: ReportQueue | None, name: str, token: int) -> None:
        self._queue, self.name, self.token, self._ended = queue, name, token, False

    def __enter__(self) -> Phase:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(error=exc)

    def end(self, error: BaseException | None = None) -> None:
        """End the phase (idempotent); ``error`` marks its span as failed."""
        if self._ended:
            return
        self._ended = True
        q = self._queue
        if q is None:
            return
        entry = (self.token, self.name)
        if entry in q.open_phases:
            q.open_phases.remove(entry)
        err = None if error is None else (type(error).__name__, str(error))
        q.step_clock = time.perf_counter()  # the phase's time is no step's (Reporter.step_end)
        q.put(PhaseEnd(time.time(), self.token, err))


class Reporter:
    """Reports training telemetry to the card and the OTel stream.

    ``Reporter()`` sets telemetry up for this process on first use (see
    :func:`traincard_otel.configure` for the settings it accepts) and every later ``Reporter()``
    reports into the same pipeline. Example::

        from traincard_otel import Reporter

        reporter = Reporter()
        with reporter.phase("train"):
            for step in range(100):
                reporter.metric("loss", train_step(), step)
        reporter.checkpoint("out/ckpt-100", metadata={"metric": "loss", "value": 0.1})
        reporter.close()

    Raises:
        ConfigError: a setting is unknown or invalid, or differs from the settings telemetry is
            already running with (call :func:`traincard_otel.shutdown` first to change them).
    """

    def __init__(self, **settings: Reported) -> None:
        pipeline = _pipeline.start(**settings)
        if pipeline is not None and not pipeline.card_refresher_started:
            _start_card_refresher(pipeline)
        self._attach(pipeline)

    @classmethod
    def _bound(cls, pipeline: _pipeline.Pipeline | None) -> Reporter:
        reporter = cls.__new__(cls)
        reporter._attach(pipeline)
        return reporter

    def _attach(self, pipeline: _pipeline.Pipeline | None) -> None:
        self._pipeline = pipeline
        self._on = pipeline is not None
        self._queue = pipeline.queue if pipeline is not None else ReportQueue(0, report_metrics=False)
        self._q = self._queue.items
        self._cap = self._queue.cap
        self._report_metrics = self._on and self._queue.report_metrics
        self._guards = pipeline.guards if pipeline is not None else None

    @property
    def settings(self) -> Settings | None:
        """The resolved settings, or None when telemetry is disabled."""
        return self._pipeline.settings if self._pipeline is not None else None

    @property
    def enabled(self) -> bool:
        """False when telemetry is off (``OTEL_SDK_DISABLED=true``): every call is then a no-op."""
        return self._on

    @property
    def step(self) -> int | None:
        """The last step reported (by a step end, a metric or ``progress``)."""
        return self._queue.step

    @property
    def overflow(self) -> int:
        """Reports dropped because the queue was full (shown in the card)."""
        return self._queue.overflow

    @property
    def heartbeat_at(self) -> float:
        return self._queue.heartbeat_at

    @property
    def progress_fields(self) -> dict[str, Reported]:
        return self._queue.progress

    @property
    def current_phase(self) -> str | None:
        """The innermost open phase's name."""
        phases = self._queue.open_phases
        return phases[-1][1] if phases else None

    @property
    def should_stop(self) -> bool:
        """True once an anomaly that ``stop_on`` names was seen: save a checkpoint and leave the
        loop (``if reporter.should_stop: save(); break``). The HF and Lightning adapters do it."""
        guards = self._guards
        return guards is not None and guards.trigger is not None

    @property
    def stop_reason(self) -> str | None:
        """Why :attr:`should_stop` is true: the kind and the one-line explanation."""
        trigger = self._guards.trigger if self._guards is not None else None
        return f"{trigger.kind}: {trigger.message}" if trigger is not None else None

    def stop_early(self, reason: str) -> None:
        """Say that training stops for ``reason`` (:attr:`should_stop` becomes true and the run ends
        *stopped early*). The adapters call it on the ranks that stop because another rank's
        ``stop_on`` rule tripped; a loop may call it for a reason of its own."""
        if self._guards is not None:
            self._guards.stop_requested("requested", reason, self._queue.step)

    # -- metrics -----------------------------------------------------------------------------
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
        the installed hooks timed since the previous step end (:meth:`part_clock`)."""
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

    def part_clock(self, make: Callable[[], PartClock] = PartClock) -> PartClock | None:
        """The clock the framework hooks time the step's parts with (one per process, made by
        ``make`` on first use), or None when the ``anatomy`` setting is off or telemetry is."""
        settings = self.settings
        if settings is None or not settings.anatomy:
            return None
        q = self._queue
        if q.parts is None:
            q.parts = make()
        return q.parts

    def progress(self, **fields: Reported) -> None:
        """Update status fields: ``step``, ``epoch``, ``max_steps``, ``num_epochs``,
        ``batch_size``, ``world_size`` (shown in the card's status panel, used for the ETA)."""
        if self._on:
            if fields.get("step") is not None:
                self._queue.step = fields["step"]
            self._queue.progress.update(fields)

    def heartbeat(self) -> None:
        """Say that this rank is alive (every rank should call it, or report steps)."""
        self._queue.heartbeat_at = time.time()

    # -- logs, phases, checkpoints ----------------------------------------------------------
    def log(
        self,
        line: str,
        level: str = "INFO",
        *,
        traceback: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        """Record a log line (shown in the card's log tail, exported as an OTel log record)."""
        if self._on:
            lvl = level.upper() if isinstance(level, str) else str(level)
            self._queue.put(
                LogLine(time.time(), lvl if lvl in _LEVELS else "INFO", str(line), traceback, attributes)
            )

    def phase(self, name: str) -> Phase:
        """Start a phase; returns a context manager. Phases are spans under ``training.run``.

        Without ``with``, the phase lasts until its ``end()`` or until the reporter closes.
        """
        q = self._queue
        ph = Phase(q if self._on else None, str(name), next(q.phase_tokens))
        if self._on:
            q.open_phases.append((ph.token, ph.name))
            q.step_clock = time.perf_counter()
            q.put(PhaseStart(time.time(), ph.name, ph.token, q.step))
        return ph

    def meter(self, phase: str | None = None, *, every: int = 50) -> ItemMeter:
        """Count the items of an evaluation or inference loop: returns an :class:`ItemMeter`.

        Call ``meter.item(latency_s, tokens=..., ttft_s=..., error=...)`` once per item; every
        ``every`` items (and at ``close()``, or the end of a ``with`` block) it reports items/s,
        latency percentiles, errors and, for generation, tokens/s and time to first token, as
        metrics at step = items done, in ``phase`` (the phase open now when None).
        """
        return ItemMeter(self, every=every, phase=self.current_phase if phase is None else phase)

    def checkpoint(
        self,
        path: str | os.PathLike[str],
        step: int | None = None,
        metadata: Mapping[str, Reported] | None = None,
    ) -> None:
        """Record a saved checkpoint. Its size is measured off the training thread.

        ``metadata`` may hold ``metric`` (name), ``value``, ``greater_is_better`` and ``best``
        (bool); the card marks the best checkpoint.
        """
        if self._on:
            step = self._queue.step if step is None else step
            if self._guards is not None:
                self._guards.checkpointed(os.fspath(path), step)
            self._queue.put(CheckpointSaved(time.time(), os.fspath(path), step, dict(metadata or {})))

    def system(self, stats: Mapping[str, float]) -> None:
        """Record your own system figures (name -> value), next to the sampled ones."""
        if self._on:
            self._queue.put(SystemReport(time.time(), dict(stats)))

    def hyperparameters(self, values: Mapping[str, object]) -> None:
        """Record the run's hyperparameters (shown in the card, exported as an event)."""
        if self._on:
            self._queue.put(Hyperparameters(time.time(), {str(k): str(v) for k, v in values.items()}))

    def event(
        self, name: str, attributes: Mapping[str, Reported] | None = None, body: Reported = None
    ) -> None:
        """Record a lifecycle event (an OTel log record with ``event_name``)."""
        if self._on:
            self._queue.put(LifecycleEvent(time.time(), name, dict(attributes or {}), body))

    def failure(self, exc: BaseException, *, flush: bool = True) -> None:
        """Record an exception that ends training, then flush (bounded) so it survives the crash.

        A ``KeyboardInterrupt`` is recorded as what it is, an interruption: the run ends as
        terminated by SIGINT, not failed."""
        if self._pipeline is not None:
            self._pipeline.failure(exc, flush=flush)

    # -- lifecycle ----------------------------------------------------------------------------
    def flush(self, timeout_s: float | None = None) -> bool:
        """Push everything reported so far to the store (bounded; returns False on timeout)."""
        if self._pipeline is None:
            return True
        return self._pipeline.flush(timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        """Flush and shut the pipeline down (bounded by ``TRAINCARD_SHUTDOWN_TIMEOUT``)."""
        if self._pipeline is not None:
            self._pipeline.shutdown(timeout_s)


def _start_card_refresher(pipeline: _pipeline.Pipeline) -> None:
    """instrument() inside a step with ``@card(type="traincard")`` but without ``@traincard``."""
    pipeline.card_refresher_started = True
    if pipeline.configured_by_step or pipeline.mf is None or pipeline.backend is None:
        return
    from .metaflow.refresher import Refresher, traincard_cards

    if not traincard_cards():
        return
    settings = pipeline.settings
    refresher = Refresher(
        pipeline.backend,
        pipeline.mf.pathspec,
        settings.refresh_interval_s,
        hourly_cost=settings.hourly_cost,
        publish=pipeline.insight_gauges.publish,
        baseline=settings.baseline,
        pathspec=pipeline.mf.pathspec,
    ).start()
    pipeline.on_shutdown.append(refresher.stop)


def configure(
    *,
    store: str | None = None,
    service_name: str | None = None,
    flush_interval_s: float | None = None,
    system: bool | None = None,
    system_interval_s: float | None = None,
    buffer_cap: int | None = None,
    report_ranks: str | None = None,
    refresh_interval_s: float | None = None,
    shutdown_timeout_s: float | None = None,
    log_level: str | None = None,
    stall_timeout_s: float | None = None,
    rank_timeout_s: float | None = None,
    hourly_cost: float | None = None,
    capture_console: bool | None = None,
    anomalies: str | None = None,
    baseline: str | None = None,
    stop_on: str | Sequence[str] | None = None,
    notify: str | Sequence[str] | None = None,
    notify_on: str | Sequence[str] | None = None,
    attempt: int | None = None,
    genai: bool | None = None,
    genai_prices: str | None = None,
    anatomy: bool | None = None,
    profile_on: str | Sequence[str] | None = None,
    memory_history: bool | None = None,
) -> Reporter:
    """Set up telemetry for this process and return a :class:`Reporter`.

    Each argument beats its ``TRAINCARD_*``/``OTEL_*`` environment variable, which beats the
    default; None (the default) leaves the setting to the variable. ``docs/configuration.md`` lists
    them with their variables and defaults: ``store`` (a directory or bucket URL, or ``"off"``),
    ``service_name``, ``flush_interval_s``, ``system`` and ``system_interval_s`` (host and GPU
    sampling), ``buffer_cap``, ``report_ranks`` (``"0"`` or ``"all"``), ``refresh_interval_s``,
    ``shutdown_timeout_s``, ``log_level``, ``stall_timeout_s``, ``rank_timeout_s``,
    ``hourly_cost``, ``capture_console``, ``anomalies`` (the rules' text, or ``"off"``),
    ``baseline``, ``stop_on`` (anomaly kinds that stop training: ``nan``, ``loss_spike``,
    ``grad_explosion``, ``throughput_drop``, ``eval_regression``, ``stall``), ``notify`` (webhook
    URLs), ``notify_on`` (the kinds notified), ``attempt``, ``genai`` (capture agent loops from
    GenAI spans of the global tracer provider), ``genai_prices`` (``model=input:output`` per
    million tokens), ``anatomy`` (time each step's parts), ``profile_on`` (kinds that start a
    profile: ``throughput_drop``, ``straggler``, ``loss_spike``, ``grad_explosion``) and
    ``memory_history`` (CUDA allocation history, for the snapshot at an out-of-memory error).
    Calling it again with the same settings (or none) returns a reporter of the running pipeline.

    Raises:
        ConfigError: a setting is invalid, or differs from the running pipeline's.
    """
    given = {k: v for k, v in locals().items() if v is not None}
    return Reporter(**given)


def active_reporter() -> Reporter | None:
    """A reporter of this process's running pipeline, if telemetry is set up."""
    pipeline = _pipeline.active()
    return Reporter._bound(pipeline) if pipeline is not None else None
