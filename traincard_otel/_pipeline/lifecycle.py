"""One process's telemetry pipeline: queue -> converter -> OTel SDK -> exporters -> store writer.

The pipeline owns the flush schedule (:mod:`.schedule`), the status snapshot it emits as a
``traincard.status`` event, and a bounded shutdown.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry._logs import SeverityNumber
from opentelemetry.metrics import CallbackOptions, Meter, NoOpMeter, Observation
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from .. import _logbridge as logbridge
from .._config import Settings
from .._convert import Converter
from .._convert.anomalies import parse_rules
from .._convert.lines import StoreLines
from .._identity import ENV_LAUNCHER_PID, MetaflowIdentity, RankIdentity, resource_attributes
from .._insights.analysis import Insights, analyse
from .._queue import ReportQueue
from .._safety import internal_error, report_internal_error
from .._schema import (
    RUN_SPAN,
    Attr,
    Event,
    Failure,
    LifecycleEvent,
    LogLine,
    Metric,
    StatusSnapshot,
    SystemMetric,
)
from .._schema.records import GENAI_PRICES_FIELD
from .._store.backends import Backend
from .._store.reader import StoreReader
from .._store.writer import StoreWriter
from .._telemetry.health import Watchdog
from .._telemetry.memory_history import MemoryHistory
from .._types import JsonObject, Reported
from .._version import __version__
from . import children, profiling
from .bounded import bounded, left
from .genai import GenAISpanProcessor, capture_genai_spans
from .guards import Guards, notified_kinds
from .insight_gauges import InsightGauges
from .notify import Notifier
from .providers import build_providers
from .schedule import FlushSchedule

if TYPE_CHECKING:
    from .._telemetry import SystemSampler
    from .._telemetry.console import ConsoleCapture

logger = logging.getLogger("traincard_otel")
JUDGE_PERIOD_S = 0.25  # how often the rows are drained and judged while stop_on is armed
_SCOPE = "traincard_otel"


class Pipeline:
    """Everything one process runs for telemetry: providers, converter, store writer, sampler.

    Building one starts nothing (no thread, no hook, no event); :meth:`start` starts it.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        mf: MetaflowIdentity | None,
        rank: RankIdentity,
        backend: Backend | None,
    ) -> None:
        self.settings, self.mf, self.rank, self.backend = settings, mf, rank, backend
        anomaly_rules = parse_rules(settings.anomalies)  # a bad rule fails before anything starts
        self.started_at = time.time()
        self.status = "running"
        self.terminated_by: str | None = None
        self.attempt = mf.retry_count if mf else (settings.attempt or 0)
        self.resource = Resource.create(resource_attributes(mf, rank, settings.service_name))
        self.queue = ReportQueue(
            settings.buffer_cap, report_metrics=rank.rank == 0 or settings.report_ranks == "all"
        )
        self.writer = (
            StoreWriter(
                backend,
                attempt=self.attempt,
                rank=rank.rank,
                flush_interval_s=settings.flush_interval_s,
                max_pending=settings.buffer_cap,
            )
            if backend is not None
            else None
        )
        self.providers = build_providers(settings, self.resource, self.writer)
        tracer = self.providers.tracer_provider.get_tracer(_SCOPE, __version__)
        self.logger = self.providers.logger_provider.get_logger(_SCOPE, __version__)
        self.run_span = tracer.start_span(
            RUN_SPAN, context=otel_context.get_current(), attributes={Attr.ATTEMPT: self.attempt}
        )
        meter = self.providers.meter_provider.get_meter(_SCOPE, __version__)
        # The run's own figures are in the store's rows, events and status already; as metrics
        # they serve metric backends only, and collecting them for the store alone would double
        # the metric reader's work (docs/schema.md).
        run_meter: Meter = meter if self.providers.exports_metrics else NoOpMeter(_SCOPE, __version__)
        self.sampler: SystemSampler | None = None
        self.memory = (  # CUDA allocations recorded, for the snapshot at an out-of-memory error
            MemoryHistory(
                backend, rank=rank.rank, attempt=self.attempt, emit=self.event, step=lambda: self.queue.step
            )
            if settings.memory_history
            else None
        )
        try:
            self._build_sampler(meter)
        except Exception as exc:
            internal_error("system sampler", exc)
        self.converter = Converter(
            self.queue,
            tracer=tracer,
            logger=self.logger,
            meter=run_meter,
            run_span=self.run_span,
            last_system=self.last_system,
            timed=self.providers.exports_metrics,
            anomaly_rules=anomaly_rules,
            memory_at_oom=lambda: self.memory.at_oom if self.memory is not None else None,
        )
        if self.writer is not None and not self.providers.exports_logs:
            self.converter.store_lines = StoreLines(self.writer)
        self._pipeline_instruments(run_meter)
        self.genai: GenAISpanProcessor | None = None
        if settings.genai:  # agent loops from the global tracer provider's GenAI spans
            self.genai = capture_genai_spans(self.queue, run_meter)
            if settings.genai_prices:
                self.queue.progress[GENAI_PRICES_FIELD] = settings.genai_prices
        # Goodput and MFU from this process's own store (rank 0: its timeline is the run's) when a
        # live card's refresher has not just published the analysis it draws.
        own = backend is not None and rank.rank == 0
        self._own_reader: StoreReader | None = None
        self.insight_gauges = InsightGauges(run_meter, source=self._own_insights if own else None)
        self.watchdog = Watchdog(
            progress=lambda: (self.queue.step, self.queue.heartbeat_at),
            recent_step_times=self.converter.rows.recent_durations,
            recent_wait_shares=self.converter.rows.recent_wait_shares,
            gpu_utilization=self.gpu_utilization,
            emit=self.event,
            backend=backend,
            rank=rank.rank,
            world_size=rank.world_size,
            attempt=self.attempt,
            host=os.uname().nodename,
            stall_floor_s=settings.stall_timeout_s,
            rank_timeout_s=settings.rank_timeout_s,
            rank_check_s=max(1.0, min(5.0, settings.rank_timeout_s / 2)),
        )
        self.converter.instruments.observe_health(run_meter, self.watchdog.status_fields)
        self.guards = self._build_guards()
        self.profiling = profiling.attach(  # after the guards: it chains their event observer
            settings.profile_on,
            self.queue,
            backend,
            rank=rank.rank,
            attempt=self.attempt,
            converter=self.converter,
            watchdog=self.watchdog,
            emit=self.event,
        )
        self.ended_siblings: list[JsonObject] = []  # other ranks of this node seen to end
        self._full_period = settings.flush_interval_s if self.writer is not None else 1.0
        self._next_full = 0.0
        # With stop_on armed the rows are judged often, so that training stops within a step or two.
        period = min(self._full_period, JUDGE_PERIOD_S) if self.guards.stop_on else self._full_period
        self.schedule = FlushSchedule(self.tick, period)
        self.closed = False
        self.configured_by_step = False  # by @traincard, which runs the card's refresher itself
        self.card_refresher_started = False
        self._close_lock = threading.Lock()
        self.on_shutdown: list[Callable[[], None]] = [self.watchdog.stop]
        if self.profiling is not None:
            capture = self.profiling.capture
            self.on_shutdown.append(lambda: capture.close(settings.shutdown_timeout_s / 2))
        if self.genai is not None:
            self.on_shutdown.append(self.genai.shutdown)
        self._log_bridge: logbridge.LogBridge | None = None
        self.console: ConsoleCapture | None = None

    def _build_guards(self) -> Guards:
        settings, rank = self.settings, self.rank
        # One notice per event in a gang: only its first rank sends (the control task's; where the
        # control task's step process started the ranks, each sends what only it sees).
        sends = bool(settings.notify) and rank.rank == 0
        launcher_pid = os.environ.get(ENV_LAUNCHER_PID)
        under_launcher = not rank.launcher and launcher_pid is not None and launcher_pid != str(os.getpid())
        notifier = (
            Notifier(
                settings.notify,
                notified_kinds(settings, under_launcher=under_launcher),
                timeout_s=min(5.0, settings.shutdown_timeout_s),
            )
            if sends
            else None
        )
        where = self.mf.pathspec if self.mf else (self.backend.spec if self.backend is not None else None)
        guards = Guards(settings, emit=self.event, notifier=notifier, rank=rank.rank, run=where, card=where)
        if guards.stop_on or notifier is not None:
            self.converter.spans.observer = guards.observe
        return guards

    def add_log_processor(self, processor: LogRecordProcessor) -> None:
        """Attach another reader of the run's log records (log lines then go through the SDK)."""
        self.providers.logger_provider.add_log_record_processor(processor)
        self.converter.send_lines_through_sdk()

    def start(self) -> Pipeline:
        """Start what runs on its own: the writer, the flush schedule, the watchdog, the system
        sampler, the log and console capture; then record that the run started."""
        if self.settings.flight_recorder and self.rank.world_size > 1:
            from .._telemetry import collectives

            collectives.enable()  # before the process group is made, where telemetry starts first
        if self.writer is not None:
            self.writer.start()
        self.schedule.start()
        self.watchdog.start()
        if self.memory is not None and self.memory.start():
            self.on_shutdown.append(self.memory.stop)
        self._watch_siblings()
        try:
            self._start_sampler()
        except Exception as exc:
            internal_error("system sampler", exc)
        if self.settings.log_level != "OFF":
            bridge = self._log_bridge = logbridge.LogBridge(self.queue, self.settings.log_level).attach()
            self.on_shutdown.append(bridge.detach)
        if self.settings.capture_console:
            self._capture_console()
        self.event(
            Event.RUN_STARTED,
            {Attr.ATTEMPT: self.attempt, Attr.RANK: self.rank.rank, Attr.HOST_NAME: str(os.uname().nodename)},
        )
        return self

    def _pipeline_instruments(self, meter: Meter) -> None:
        def restarts(_options: CallbackOptions) -> list[Observation]:
            return [Observation(self.attempt)]

        def dropped(_options: CallbackOptions) -> list[Observation]:
            counts = dict(self.writer.dropped) if self.writer is not None else {}
            if self.queue.overflow:
                counts["buffer_full"] = counts.get("buffer_full", 0) + self.queue.overflow
            return [Observation(n, {Attr.DROP_REASON: reason}) for reason, n in counts.items()]

        def write_errors(_options: CallbackOptions) -> list[Observation]:
            return [Observation(self.writer.write_errors)] if self.writer is not None else []

        for spec, kind, cb in (
            (Metric.RESTARTS, "gauge", restarts),
            (Metric.DROPPED, "counter", dropped),
            (Metric.STORE_WRITE_ERRORS, "counter", write_errors),
        ):
            create = meter.create_observable_gauge if kind == "gauge" else meter.create_observable_counter
            create(spec.name, callbacks=[cb], unit=spec.unit, description=spec.meaning)

    def _watch_siblings(self) -> None:
        from .._telemetry.siblings import SiblingWatch

        if self.rank.world_size < 2 or self.rank.launcher or self.writer is None:
            return
        if not SiblingWatch.available():
            return

        def ended(record: JsonObject) -> None:
            self.ended_siblings.append({**record, "seen_at_step": self.queue.step})
            if record.get("exitcode") or record.get("signal"):
                how = f"exited with {record.get('exitcode')}" if record.get("exitcode") else "was killed"
                self.guards.rank_ended(int(record.get("rank") or 0), self.queue.step, how)
            self._next_full = 0.0  # a whole turn, status and write included
            self.schedule.wake()  # the launcher may stop this rank in a moment: say it now

        try:
            watch = SiblingWatch(self.rank, ended).start()
        except Exception as exc:
            internal_error("sibling watch", exc)
            return
        self.on_shutdown.insert(0, watch.stop)

    def _capture_console(self) -> None:
        from .._telemetry.console import ConsoleCapture

        queue, stream_attrs = self.queue, {Attr.RANK: str(self.rank.rank)}

        def sink(level: str, line: str, traceback: str | None, stream: str | None, at: float) -> None:
            attrs = {**stream_attrs, Attr.LOG_STREAM: stream} if stream else stream_attrs
            queue.put(LogLine(at, level, line, traceback, attrs))

        def seen(line: str) -> bool:
            return any(m in line for m in list(queue.recent_messages) if len(m) >= 8)

        try:
            console = self.console = ConsoleCapture(sink, seen).start()
        except Exception as exc:
            internal_error("console capture", exc)
            return
        self.on_shutdown.insert(0, console.stop)  # first: what was printed last still gets in

    def _build_sampler(self, meter: Meter) -> None:
        # One sampler per node: N ranks on a node must not report the node N times.
        if not self.settings.system or self.rank.local_rank != 0:
            return
        from .._telemetry import SystemSampler, register_system_instruments

        self.sampler = SystemSampler(self.settings.system_interval_s)
        register_system_instruments(meter, self.sampler)

    def _start_sampler(self) -> None:
        if self.sampler is None:
            return
        self.sampler.start()
        reader = self.providers.store_reader
        if reader is not None:  # each sample stored once, as it is taken (the first is taken already)
            reader.collect()
            self.sampler.add_listener(lambda _snapshot: reader.collect())

    def leave_to_parent(self) -> None:
        """In a forked child: this copy is the parent's pipeline, and goes silent here.

        Its threads did not survive the fork and nothing restarts them; it is closed, so the exit
        hooks leave it alone; Python logging no longer feeds its queue (a child's warning reaches
        the parent's console capture through the inherited stderr instead), and the console
        capture stops holding this process's copies of its descriptors.
        """
        self.closed = True
        try:
            if self._log_bridge is not None:
                self._log_bridge.detach()
            if self.console is not None:
                self.console.leave_to_parent()
        except Exception as exc:
            internal_error("leaving a forked child", exc)

    # -- what other parts read ------------------------------------------------------------------
    def last_system(self) -> dict[str, float]:
        snap = self.sampler.latest() if self.sampler is not None else None
        return {s.reading_key: s.value for s in getattr(snap, "samples", ())}

    def gpu_utilization(self) -> list[float]:
        snap = self.sampler.latest() if self.sampler is not None else None
        return [s.value for s in getattr(snap, "samples", ()) if s.name == SystemMetric.GPU_UTILIZATION.name]

    def event(self, name: str, attributes: Mapping[str, Reported], body: Reported = None) -> None:
        """Queue a lifecycle event (the watchdog's and the pipeline's own)."""
        self.queue.put(LifecycleEvent(time.time(), name, dict(attributes), body))

    def failure(self, exc: BaseException, *, flush: bool = True) -> None:
        """Record an exception that ends training (``Reporter.failure`` and the uncaught-exception
        hook both come here), then flush (bounded) so it survives the crash. A
        ``KeyboardInterrupt`` (Ctrl-C) is no failure: the run ends terminated by SIGINT."""
        if isinstance(exc, KeyboardInterrupt):
            self.terminated_by = "SIGINT"
        else:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.queue.put(Failure(time.time(), exc, text))
        if flush:
            self.flush()

    def _own_insights(self) -> Insights | None:
        """What this process's store holds so far, analysed (read incrementally)."""
        if self.backend is None:
            return None
        if self._own_reader is None:
            self._own_reader = StoreReader(self.backend, source=self.mf.pathspec if self.mf else None)
        return analyse(self._own_reader.read())

    def state(self) -> StatusSnapshot:
        q = self.queue
        st: StatusSnapshot = {
            "status": self.status,
            "terminated_by": self.terminated_by,
            "started_at": self.started_at,
            "updated_at": time.time(),
            "heartbeat_at": q.heartbeat_at,
            "step": q.step,
            "progress": dict(q.progress),
            "host": os.uname().nodename,
            "pid": os.getpid(),
            "local_rank": self.rank.local_rank,
            "node_rank": self.rank.node_rank,
            "world_size": self.rank.world_size,
            "pathspec": self.mf.pathspec if self.mf else None,
            "origin_run_id": self.mf.origin_run_id if self.mf else None,
            "hot_path_overflow": q.overflow,
            "hourly_cost": self.settings.hourly_cost,
            "rank_timeout_s": self.settings.rank_timeout_s,
            "flush_interval_s": self.settings.flush_interval_s,
            "ended_siblings": list(self.ended_siblings),
            "notes": list(getattr(self.sampler, "notes", []) or [])
            + ([self.memory.note] if self.memory is not None and self.memory.note else []),
            "last_system": self.last_system(),
        }
        st.update(self.converter.status_fields())
        st.update(self.watchdog.status_fields())
        st["anatomy"] = self.converter.rows.recent_anatomy(self.rank.rank)
        st["profile"] = self.profiling.capture.latest if self.profiling is not None else None
        st["guards"] = self.guards.status_fields()
        return st

    # -- the schedule -----------------------------------------------------------------------------
    def emit_status(self) -> None:
        """The rank's status panel as a ``traincard.status`` event (the store keeps it as state)."""
        body: JsonObject = dict(self.state())  # JSON-like values all through: an OTel AnyValue map
        self.logger.emit(
            timestamp=int(time.time() * 1e9),
            context=set_span_in_context(self.run_span),
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=body,
            event_name=Event.STATUS,
        )

    def tick(self) -> None:
        """One turn of the schedule: reports -> signals -> exporters, then the writer writes.

        With ``stop_on`` armed the schedule turns every :data:`JUDGE_PERIOD_S`, and a turn before
        the flush interval is up only drains (the anomaly rules judge what was drained)."""
        if self.genai is not None:
            self.genai.record_pending()
        self.converter.drain()
        now = time.monotonic()
        if now < self._next_full:
            return
        self._next_full = now + self._full_period - 0.01
        if self._log_bridge is not None:
            self._log_bridge.refresh()
        self.emit_status()
        if self.writer is not None:
            self.writer.request_flush()
        children.claim()

    def flush(self, timeout_s: float | None = None) -> bool:
        timeout = self.settings.shutdown_timeout_s if timeout_s is None else timeout_s
        if self.genai is not None:
            self.genai.record_pending()
        self.converter.drain()
        self.emit_status()
        if self.writer is None:
            return True
        return bounded(self.writer.flush_now, timeout, default=False)

    def shutdown(self, timeout_s: float | None = None, status: str | None = None) -> None:
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
        deadline = time.monotonic() + (self.settings.shutdown_timeout_s if timeout_s is None else timeout_s)
        try:
            if self.watchdog.stalled_since is not None:  # where a stalled rank was when it ended
                self.watchdog.dump("sigterm" if self.terminated_by or status == "terminated" else "exit")
            for hook in self.on_shutdown:
                hook()
            self.schedule.stop(0.5)
            self.converter.drain()
            if self.converter.failures.summary is not None:
                self.status = "failed"
            elif status is not None:
                self.status = status
            elif self.terminated_by is not None:  # (interrupted: Ctrl-C, see failure())
                self.status = "terminated"
            elif self.status == "running":
                self.status = "finished"
            self.status = self.guards.end_status(self.status)
            end = time.time()
            self.converter.close_open_phases(end)
            guard_attrs = self.guards.ended(self.status, self.queue.step)
            if self.status != "failed":  # the failure event itself was emitted when it happened
                attrs = {Attr.STATUS: self.status, **guard_attrs}
                if self.terminated_by:
                    attrs[Attr.SIGNAL] = self.terminated_by
                self.event(Event.run_ended(self.status), attrs)
            self.converter.drain()
            self.emit_status()
            self.run_span.set_attribute(Attr.STATUS, self.status)
            if self.status not in ("failed", "finished", "stopped_early"):
                self.run_span.set_status(Status(StatusCode.ERROR, self.status))
            self.run_span.end(end_time=int(end * 1e9))
            if self.sampler is not None:
                self.sampler.stop(0.5)
            # The OTLP metric readers export what they hold (the store's took each sample already).
            mp = self.providers.meter_provider
            bounded(lambda: mp.force_flush(1000), left(deadline, 1.0), default=False)
            if self.writer is not None:
                self.writer.close(left(deadline))
            if self.guards.notifier is not None:  # its notices went out while the writer wrote
                self.guards.notifier.close(left(deadline))
        except Exception as exc:
            report_internal_error("shutdown", exc)
        finally:
            for provider in self.providers.all():
                # The SDK's own shutdown can take 20-90 s with a dead OTLP endpoint: never wait for it.
                bounded(provider.shutdown, left(deadline, 0.2), default=None)
