"""The framework-agnostic reporting API. Everything here runs on the training thread.

Each call only appends a typed report (:mod:`traincard_otel._schema`) to the pipeline's bounded
queue or sets a plain field: no locks held across I/O, no OpenTelemetry calls, no validation beyond
what is free. The converter's thread turns the queue into OTel signals. The per-step calls
(metrics, step ends, progress) are :class:`~.metrics.MetricReporting`'s; a phase is a
:class:`~.phase.Phase`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from ..._config import Settings
from ..._schema import (
    CheckpointSaved,
    Hyperparameters,
    LifecycleEvent,
    LogLine,
    PhaseStart,
    SystemReport,
)
from ..._types import Reported
from .. import pipeline as _pipeline
from ..queue import PartClock, ReportQueue
from .items import ItemMeter
from .metrics import MetricReporting
from .phase import Phase

__all__ = ["Phase", "Reporter"]

_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


class Reporter(MetricReporting):
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
        self._attach(_pipeline.start(**settings))

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
        guards = self._guards = pipeline.guards if pipeline is not None else None
        # stop_on=nan: floats are checked here, so that should_stop is true before the next step
        self._nonfinite = guards if guards is not None and guards.stops_on_nonfinite else None

    @property
    def settings(self) -> Settings | None:
        """The resolved settings, or None when telemetry is disabled."""
        return self._pipeline.settings if self._pipeline is not None else None

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
