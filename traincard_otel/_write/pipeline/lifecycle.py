"""One process's telemetry pipeline: queue -> converter -> OTel SDK -> exporters -> store writer.

:func:`~.builder.build_pipeline` makes the parts and hands them to :class:`Pipeline`, which runs
them: it owns the flush schedule (:mod:`.schedule`), the status snapshot it emits as a
``traincard.status`` event, and a bounded shutdown.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.trace import Span, Status, StatusCode, set_span_in_context

from ..._analysis.efficiency import RankEfficiency
from ..._analysis.goodput import Goodput
from ..._config import Settings
from ..._identity import MetaflowIdentity, RankIdentity
from ..._safety import internal_error, report_internal_error
from ..._schema import Attr, Event, Failure, LifecycleEvent, StatusSection, SystemMetric
from ..._store.backends import Backend
from ..._types import JsonObject, Reported
from ..._version import __version__
from ..convert import Converter
from ..convert.tally import RunTally
from ..queue import ReportQueue
from ..store.writer import StoreWriter
from ..telemetry import logbridge as logbridge
from ..telemetry.gang_watch import GangWatch
from ..telemetry.health import Watchdog
from ..telemetry.memory_history import MemoryHistory
from ..telemetry.stack_watch import Emit
from . import children
from .bounded import bounded, left
from .capture import capture_console, watch_siblings
from .genai import GenAISpanProcessor
from .guards import Guards
from .insight_gauges import InsightGauges
from .own_summary import OwnSummary
from .profiling import Profiling
from .providers import Providers
from .schedule import FlushSchedule

if TYPE_CHECKING:
    from ..telemetry import SystemSampler
    from ..telemetry.console import ConsoleCapture

JUDGE_PERIOD_S = 0.25  # how often the rows are drained and judged while stop_on is armed
SCOPE = "traincard_otel"  # the instrumentation scope of the pipeline's tracer, logger and meter


def lifecycle_event(queue: ReportQueue) -> Emit:
    """A function that queues a lifecycle event (the watchdog's, the guard rails' and the pipeline's)."""

    def event(name: str, attributes: Mapping[str, Reported], body: Reported = None) -> None:
        queue.put(LifecycleEvent(time.time(), name, dict(attributes), body))

    return event


def last_system(sampler: SystemSampler | None) -> dict[str, float]:
    """The node's latest system readings by reading key (empty without a sampler or a sample)."""
    snap = sampler.latest() if sampler is not None else None
    return {s.reading_key: s.value for s in getattr(snap, "samples", ())}


def gpu_utilization(sampler: SystemSampler | None) -> list[float]:
    """Each GPU's latest utilization (empty without a sampler, a sample or a GPU)."""
    snap = sampler.latest() if sampler is not None else None
    return [s.value for s in getattr(snap, "samples", ()) if s.name == SystemMetric.GPU_UTILIZATION.name]


class Pipeline:
    """Everything one process runs for telemetry, as :func:`~.builder.build_pipeline` wired it: the
    queue, the converter, the providers and their exporters, the store writer, the sampler, the
    watchdog and the guard rails.

    Building one starts nothing (no thread, no hook, no event). Its lifecycle: :meth:`start`, a
    :meth:`tick` per turn of its schedule, :meth:`flush` on demand, :meth:`shutdown` once.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        mf: MetaflowIdentity | None,
        rank: RankIdentity,
        backend: Backend | None,
        attempt: int,
        queue: ReportQueue,
        writer: StoreWriter | None,
        providers: Providers,
        run_span: Span,
        converter: Converter,
        sampler: SystemSampler | None,
        watchdog: Watchdog,
        guards: Guards,
        genai: GenAISpanProcessor | None,
        insight_gauges: InsightGauges,
        tally: RunTally,
        gang_watch: GangWatch | None,
        started_at: float,
        profiling: Profiling | None = None,
        memory: MemoryHistory | None = None,
    ) -> None:
        self.settings, self.mf, self.rank, self.backend = settings, mf, rank, backend
        self.attempt = attempt
        self.queue, self.writer, self.providers, self.run_span = queue, writer, providers, run_span
        self.logger = providers.logger_provider.get_logger(SCOPE, __version__)
        self.converter, self.sampler, self.watchdog, self.guards = converter, sampler, watchdog, guards
        self.genai, self.insight_gauges = genai, insight_gauges
        self._emit = lifecycle_event(queue)
        self.tally, self.gang_watch = tally, gang_watch
        self.profiling, self.memory = profiling, memory  # profile captures; CUDA memory at an OOM
        self.started_at = started_at
        self.status = "running"
        self.terminated_by: str | None = None
        self.ended_siblings: list[JsonObject] = []  # other ranks of this node seen to end
        self._full_period = settings.flush_interval_s if writer is not None else 1.0
        self._next_full = 0.0
        # With stop_on armed the rows are judged often, so that training stops within a step or two.
        period = min(self._full_period, JUDGE_PERIOD_S) if guards.stop_on else self._full_period
        self.schedule = FlushSchedule(self.tick, period)
        self.closed = False
        self._close_lock = threading.Lock()
        self.on_shutdown: list[Callable[[], None]] = [watchdog.stop]
        if genai is not None:
            self.on_shutdown.append(genai.shutdown)
        if profiling is not None:  # a capture's trace being written is waited for, bounded
            self.on_shutdown.append(partial(profiling.capture.close, settings.shutdown_timeout_s / 2))
        self._log_bridge: logbridge.LogBridge | None = None
        self.console: ConsoleCapture | None = None
        # this process's summary for sweeps, written by its own writer (nothing reads it back)
        self.own_summary = OwnSummary(writer, tally, self) if writer is not None else None

    def add_log_processor(self, processor: LogRecordProcessor) -> None:
        """Attach another reader of the run's log records (log lines then go through the SDK)."""
        self.providers.logger_provider.add_log_record_processor(processor)
        self.converter.send_lines_through_sdk()

    def start(self) -> Pipeline:
        """Start what runs on its own: the writer, the flush schedule, the watchdog, the system
        sampler, the log and console capture; then record that the run started."""
        if self.settings.flight_recorder and self.rank.world_size > 1:
            from ..telemetry import collectives

            collectives.enable()  # before the process group is made, where telemetry starts first
        if self.writer is not None:
            self.writer.start()
        self.schedule.start()
        self.watchdog.start()
        if self.memory is not None and self.memory.start():
            self.on_shutdown.append(self.memory.stop)
        siblings = watch_siblings(self.rank, self.writer is not None, self._sibling_ended)
        if siblings is not None:
            self.on_shutdown.insert(0, siblings.stop)
        try:
            self._start_sampler()
        except Exception as exc:
            internal_error("system sampler", exc)
        if self.settings.log_level != "OFF":
            bridge = self._log_bridge = logbridge.LogBridge(self.queue, self.settings.log_level).attach()
            self.on_shutdown.append(bridge.detach)
        if self.settings.capture_console:
            self.console = capture_console(self.queue, self.rank)
            if self.console is not None:
                self.on_shutdown.insert(0, self.console.stop)  # first: what was printed last still gets in
        self.event(
            Event.RUN_STARTED,
            {Attr.ATTEMPT: self.attempt, Attr.RANK: self.rank.rank, Attr.HOST_NAME: str(os.uname().nodename)},
        )
        return self

    def _sibling_ended(self, record: JsonObject) -> None:
        """Another rank of this node ended (the sibling watch's thread)."""
        self.ended_siblings.append({**record, "seen_at_step": self.queue.step})
        if record.get("exitcode") or record.get("signal"):
            how = f"exited with {record.get('exitcode')}" if record.get("exitcode") else "was killed"
            self.guards.rank_ended(int(record.get("rank") or 0), self.queue.step, how)
        self._next_full = 0.0  # a whole turn, status and write included
        self.schedule.wake()  # the launcher may stop this rank in a moment: say it now

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
    def event(self, name: str, attributes: Mapping[str, Reported], body: Reported = None) -> None:
        """Queue a lifecycle event (the pipeline's own)."""
        self._emit(name, attributes, body)

    def last_system(self) -> dict[str, float]:
        """The node's latest system readings (see :func:`last_system`)."""
        return last_system(self.sampler)

    def gpu_utilization(self) -> list[float]:
        """Each GPU's latest utilization (see :func:`gpu_utilization`)."""
        return gpu_utilization(self.sampler)

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

    def goodput(self) -> Goodput | None:
        """This attempt's goodput so far, from what the converter saw."""
        return self.tally.goodput(time.time(), running=self.tally.running)

    def efficiency(self) -> RankEfficiency | None:
        """This rank's model FLOP/s and MFU over its recent steps."""
        return self.tally.efficiency(self.queue.progress)

    def state(self) -> StatusSection:
        q = self.queue
        st: StatusSection = {
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
            "notes": [*(getattr(self.sampler, "notes", []) or []), *getattr(self.memory, "notes", ())],
            "last_system": self.last_system(),
        }
        st.update(self.converter.status_fields())
        st.update(self.watchdog.status_fields())
        st["guards"] = self.guards.status_fields()
        st["profile"] = self.profiling.capture.latest if self.profiling is not None else None
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
        if self.own_summary is not None:
            self.own_summary.tick(self.queue.step, self.converter.failures.summary)
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
            if self.gang_watch is not None:  # the gang's last word, before the last export and write
                bounded(self.watchdog.last_look, left(deadline, 1.0), default=None)
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
            self.tally.running = False
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
            if self.own_summary is not None:  # the process's last word for sweeps
                self.own_summary.hand_over(self.queue.step, self.converter.failures.summary)
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
