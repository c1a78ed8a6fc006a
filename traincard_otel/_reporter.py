"""The framework-agnostic reporting API. Everything here runs on the training thread.

Each call only appends a tuple to a bounded in-memory queue or sets a plain attribute: no
locks held across I/O, no OpenTelemetry calls, no validation beyond what is free. The pump
thread (:mod:`._pump`) turns the queue into OTel signals.
"""

from __future__ import annotations

import collections
import os
import time
import traceback as tb_module
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._safety import warn_once

if TYPE_CHECKING:
    from ._pipeline import Pipeline

# Queue item kinds (first element of each tuple).
METRICS, STEP, LOG, PHASE_START, PHASE_END, CHECKPOINT, SYSTEM, FAILURE, EVENT = range(9)

_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}

# Returns the (values, step, phase) reports made since its last call, in order.
MetricSource = Callable[[], Iterable[tuple[Mapping[str, Any], int | None, str | None]]]


class Phase:
    """A training phase (``train``, ``eval``, ``save`` ...); a span in the OTel stream.

    Use as a context manager, or call :meth:`end` yourself.
    """

    __slots__ = ("_ended", "_reporter", "name", "token")

    def __init__(self, reporter: Reporter, name: str, token: int) -> None:
        self._reporter, self.name, self.token, self._ended = reporter, name, token, False

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
        self._reporter._end_phase(self, error)


class Reporter:
    """Reports training telemetry. Obtain one with :func:`traincard_otel.configure`.

    Example::

        reporter = traincard_otel.configure()
        with reporter.phase("train"):
            for step in range(100):
                loss = train_step()
                reporter.metrics({"loss": loss, "lr": lr}, step=step)
        reporter.checkpoint("out/ckpt-100", step=100)
        reporter.close()
    """

    def __init__(self, pipeline: Pipeline | None, *, cap: int = 200_000, report_metrics: bool = True) -> None:
        self._pipeline = pipeline
        self._on = pipeline is not None
        self._report_metrics = report_metrics and self._on
        self._cap = cap
        self._q: collections.deque[tuple[Any, ...]] = collections.deque()
        self.overflow = 0
        self.step: int | None = None
        self.progress_fields: dict[str, Any] = {}
        self.heartbeat_at: float = time.time()
        self._phase_tokens = 0
        self._open_phases: list[Phase] = []
        self.metric_sources: tuple[MetricSource, ...] = ()
        self.sync_clocks()

    @property
    def settings(self) -> Any:
        """The resolved :class:`~traincard_otel._config.Settings`, or None when disabled."""
        return self._pipeline.settings if self._pipeline is not None else None

    @property
    def enabled(self) -> bool:
        """False when telemetry is off (``OTEL_SDK_DISABLED=true``): every call is then a no-op."""
        return self._on

    def _put(self, item: tuple[Any, ...]) -> None:
        if len(self._q) < self._cap:
            self._q.append(item)
        else:
            self.overflow += 1

    # -- metrics -----------------------------------------------------------------------------
    def metric(
        self, name: str, value: Any, step: int | None = None, tags: Mapping[str, str] | None = None
    ) -> None:
        """Report one scalar (a float, int, 0-d tensor or numpy scalar) at ``step``.

        Bad values (NaN/inf are recorded; non-numbers, empty names and non-string tags are
        rejected) are reported once in the log and never raise into the training loop.
        """
        if self._report_metrics:
            if step is not None:
                self.step = step
            self._put((METRICS, time.time(), step, None, {name: value}, tags))

    def metrics(
        self,
        values: Mapping[str, Any],
        step: int | None = None,
        phase: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Report several scalars logged together at one step (the hot-path form)."""
        if self._report_metrics:
            if step is not None:
                self.step = step
            # _put inlined in the per-step calls: on a step's cold caches each call layer costs µs
            if len(self._q) < self._cap:
                self._q.append((METRICS, time.time(), step, phase, dict(values), tags))
            else:
                self.overflow += 1

    def add_metric_source(self, source: MetricSource) -> None:
        """Read metrics that a framework records anyway, off the training thread.

        ``source()`` is called on the background thread before each drain (and on the caller's
        thread in :meth:`flush`); it must be safe to call while training goes on. Each report it
        returns is timed at the end of its step when that step end was reported, else when read.
        """
        if self._report_metrics:
            self.metric_sources = (*self.metric_sources, source)

    def remove_metric_source(self, source: MetricSource) -> None:
        """Stop reading ``source`` (a bound method is matched by equality: each access is a new one)."""
        self.metric_sources = tuple(s for s in self.metric_sources if s != source)

    def sync_clocks(self) -> None:
        """Re-read how far the wall clock is from ``time.perf_counter()`` (for ``step_end(at=)``;
        the background thread calls it at every drain, so a wall-clock step is caught up there)."""
        self._perf_to_wall = time.time() - time.perf_counter()

    def step_end(
        self,
        step: int,
        duration_s: float | None = None,
        samples: int | None = None,
        tokens: int | None = None,
        data_wait_s: float | None = None,
        epoch: float | None = None,
        at: float | None = None,
    ) -> None:
        """Mark an optimizer step as done: progress, step time, throughput and the time spent
        waiting for data (every rank; the card flags input-bound training from it), and the
        epoch (fractional) if known. ``at``: when the step ended, by ``time.perf_counter()``, if
        the caller has read it (it spares the training thread a read of the wall clock)."""
        if self._on:
            # A cold wall-clock read costs about 1 µs on a step's evicted caches; an addition does not.
            try:
                now = time.time() if at is None else at + self._perf_to_wall
            except TypeError:
                warn_once(
                    "step_end.at",
                    "traincard: step_end(at=%r) is not a time.perf_counter() reading; "
                    "the wall clock's time is used (reported once)",
                    at,
                )
                now = time.time()
            self.step = step
            self.heartbeat_at = now
            if epoch is not None:
                self.progress_fields["epoch"] = epoch
            if len(self._q) < self._cap:
                self._q.append((STEP, now, step, duration_s, samples, tokens, data_wait_s))
            else:
                self.overflow += 1

    def progress(self, **fields: Any) -> None:
        """Update status fields: ``step``, ``epoch``, ``max_steps``, ``num_epochs``,
        ``batch_size``, ``world_size`` (shown in the card's status panel, used for the ETA)."""
        if self._on:
            if fields.get("step") is not None:
                self.step = fields["step"]
            self.progress_fields.update(fields)

    def heartbeat(self) -> None:
        """Say that this rank is alive (every rank should call it, or report steps)."""
        self.heartbeat_at = time.time()

    # -- logs, phases, checkpoints ----------------------------------------------------------
    def log(self, line: str, level: str = "INFO", *, traceback: str | None = None) -> None:
        """Record a log line (shown in the card's log tail, exported as an OTel log record)."""
        if self._on:
            lvl = level.upper() if isinstance(level, str) else str(level)
            self._put((LOG, time.time(), lvl if lvl in _LEVELS else "INFO", str(line), traceback))

    def phase(self, name: str) -> Phase:
        """Start a phase; returns a context manager. Phases are spans under ``training.run``."""
        self._phase_tokens += 1
        ph = Phase(self, str(name), self._phase_tokens)
        if self._on:
            self._open_phases.append(ph)
            self._put((PHASE_START, time.time(), ph.name, ph.token))
        return ph

    def _end_phase(self, ph: Phase, error: BaseException | None) -> None:
        if not self._on:
            return
        if ph in self._open_phases:
            self._open_phases.remove(ph)
        err = None if error is None else (type(error).__name__, str(error))
        self._put((PHASE_END, time.time(), ph.token, err))

    @property
    def current_phase(self) -> str | None:
        return self._open_phases[-1].name if self._open_phases else None

    def checkpoint(
        self, path: str | os.PathLike[str], step: int | None = None, metadata: Mapping[str, Any] | None = None
    ) -> None:
        """Record a saved checkpoint. Its size is measured off the training thread.

        ``metadata`` may hold ``metric`` (name), ``value``, ``greater_is_better`` and ``best``
        (bool); the card marks the best checkpoint.
        """
        if self._on:
            step = self.step if step is None else step
            self._put((CHECKPOINT, time.time(), os.fspath(path), step, dict(metadata or {})))

    def system(self, stats: Mapping[str, float]) -> None:
        """Record your own system figures (name -> value), next to the sampled ones."""
        if self._on:
            self._put((SYSTEM, time.time(), dict(stats)))

    def event(self, name: str, attributes: Mapping[str, Any] | None = None, body: Any = None) -> None:
        """Record a lifecycle event (an OTel log record with ``event_name``)."""
        if self._on:
            self._put((EVENT, time.time(), name, dict(attributes or {}), body))

    def failure(self, exc: BaseException, *, flush: bool = True) -> None:
        """Record an exception that ends training, then flush (bounded) so it survives the crash."""
        if not self._on or self._pipeline is None:
            return
        text = "".join(tb_module.format_exception(type(exc), exc, exc.__traceback__))
        self._put((FAILURE, time.time(), exc, text))
        if flush:
            self.flush()

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

    def drain(self) -> list[tuple[Any, ...]]:
        """Take everything queued so far (used by the pump thread)."""
        q, out = self._q, []
        while q:
            out.append(q.popleft())
        return out
