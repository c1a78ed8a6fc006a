"""configure() / shutdown(): one private OTel pipeline per process, feeding the store and OTLP.

Providers are never set globally (Metaflow's own tracing, or user code, may own the globals);
spans still join the current trace context. Shutdown is bounded whatever the exporters do.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.metrics import NoOpMeter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from . import _config
from . import _logbridge as logbridge
from ._identity import MetaflowIdentity, RankIdentity, detect_metaflow, detect_rank, resource_attributes
from ._pump import Pump
from ._reporter import Reporter
from ._safety import internal_error, report_internal_error
from ._version import __version__
from .exporters.otlp import exporter_classes
from .exporters.store import TraincardLogExporter, TraincardMetricExporter, TraincardSpanExporter
from .store.backends import Backend, LocalBackend, MetaflowBackend, backend_from_spec
from .store.writer import StoreWriter
from .telemetry.health import Watchdog

logger = logging.getLogger("traincard_otel")

STEP_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_lock = threading.RLock()
_active: Pipeline | None = None
_disabled_reporter = Reporter(None)


def default_local_dir(env: dict[str, str] | None = None) -> str:
    """``TRAINCARD_DIR``/``<run name>`` outside Metaflow; ranks of one torchrun job share a name."""
    env = dict(os.environ) if env is None else env
    base = env.get("TRAINCARD_DIR") or os.path.join(os.getcwd(), "traincard-data")
    name = env.get("TRAINCARD_RUN_NAME")
    if not name and env.get("TORCHELASTIC_RUN_ID", "none") != "none":
        name = f"torchrun-{env['TORCHELASTIC_RUN_ID']}"
    return os.path.join(base, name) if name else base


def resolve_backend(settings: _config.Settings, mf: MetaflowIdentity | None) -> Backend | None:
    if settings.store and settings.store.lower() == "off":
        return None
    if settings.store:
        return backend_from_spec(settings.store)
    if mf is not None and mf.ds_type and mf.ds_root:
        return MetaflowBackend(mf.ds_type, mf.ds_root, mf.store_prefix)
    return LocalBackend(default_local_dir())


def _metaflow_datastore(mf: MetaflowIdentity) -> MetaflowIdentity:
    """Fill the task's datastore type and root from its metadata (public client API)."""
    if mf.ds_type and mf.ds_root:
        return mf
    from dataclasses import replace

    from metaflow import current

    task = current.task
    if task is None:
        return mf
    md = task.metadata_dict
    return replace(mf, ds_type=md.get("ds-type"), ds_root=md.get("ds-root"))


class Pipeline:
    """Everything one process runs for telemetry: providers, store writer, pump, sampler."""

    def __init__(
        self,
        settings: _config.Settings,
        *,
        mf: MetaflowIdentity | None,
        rank: RankIdentity,
        backend: Backend | None,
    ) -> None:
        self.settings, self.mf, self.rank = settings, mf, rank
        self.started_at = time.time()
        self.status = "running"
        self.terminated_by: str | None = None
        self.attempt = mf.retry_count if mf else (settings.attempt or 0)
        self.resource = Resource.create(resource_attributes(mf, rank, settings.service_name))
        self.reporter = Reporter(
            self, cap=settings.buffer_cap, report_metrics=rank.rank == 0 or settings.report_ranks == "all"
        )
        self.writer = (
            StoreWriter(
                backend,
                attempt=self.attempt,
                rank=rank.rank,
                flush_interval_s=settings.flush_interval_s,
                max_pending=settings.buffer_cap,
                state_provider=self.state,
            )
            if backend is not None
            else None
        )
        self.sampler: Any = None
        self._build_providers()
        self.tracer = self.tracer_provider.get_tracer("traincard_otel", __version__)
        self.run_span = self.tracer.start_span(
            "training.run", context=otel_context.get_current(), attributes={"traincard.attempt": self.attempt}
        )
        meter = self.meter_provider.get_meter("traincard_otel", __version__)
        # The run's own figures (steps, progress, health, drops) are in the store's rows, events
        # and state already; as metrics they serve metric backends only, and collecting them for the
        # store alone would double the metric reader's work (docs/schema.md).
        run_meter = meter if self.exports_metrics else NoOpMeter("traincard_otel", __version__)
        self._pipeline_instruments(run_meter)
        try:
            self._start_sampler(meter)
        except Exception as exc:
            internal_error("system sampler", exc)
        self.pump = Pump(
            self.reporter,
            tracer=self.tracer,
            logger=self.logger_provider.get_logger("traincard_otel", __version__),
            meter=run_meter,
            run_span=self.run_span,
            last_system=self.last_system,
            # The writer drains the pump before each flush; its own thread covers a stuck writer.
            period_s=settings.flush_interval_s + 1.0 if self.writer is not None else 1.0,
        )
        self.watchdog = Watchdog(
            progress=lambda: (self.reporter.step, self.reporter.heartbeat_at),
            recent_step_times=self.pump.recent_durations,
            recent_wait_shares=self.pump.recent_wait_shares,
            gpu_utilization=self.gpu_utilization,
            emit=lambda name, attrs: self.reporter.event(name, attrs),
            backend=backend,
            rank=rank.rank,
            world_size=rank.world_size,
            attempt=self.attempt,
            stall_floor_s=settings.stall_timeout_s,
            rank_timeout_s=settings.rank_timeout_s,
            rank_check_s=max(1.0, min(5.0, settings.rank_timeout_s / 2)),
        )
        self.pump.health = self.watchdog.status_fields
        if self.writer is not None:
            self.writer.before_flush = self.pump.drain  # a flush stores everything reported so far
        self._closed = False
        self.on_shutdown: list[Callable[[], None]] = [self.watchdog.stop]
        if self.writer is not None:
            self.writer.start()
        self.pump.start()
        self.watchdog.start()
        self._log_handler = (
            logbridge.attach(self.reporter, settings.log_level) if settings.log_level != "OFF" else None
        )
        if self._log_handler is not None:
            self.on_shutdown.append(lambda: logbridge.detach(self._log_handler))  # type: ignore[arg-type]
        self.reporter.event(
            "traincard.run.started",
            {
                "traincard.attempt": self.attempt,
                "traincard.rank": rank.rank,
                "host.name": str(os.uname().nodename),
            },
        )

    # -- construction -------------------------------------------------------------------------
    def _build_providers(self) -> None:
        s, res = self.settings, self.resource
        self.tracer_provider = TracerProvider(resource=res, shutdown_on_exit=False)
        self.logger_provider = LoggerProvider(resource=res, shutdown_on_exit=False)
        readers: list[MetricReader] = []
        if self.writer is not None:
            # The store exporters run synchronously on the pump thread: export() only appends to
            # memory, and no SDK queue sits between the pump and the store that could drop rows.
            self.tracer_provider.add_span_processor(SimpleSpanProcessor(TraincardSpanExporter(self.writer)))
            self.logger_provider.add_log_record_processor(
                SimpleLogRecordProcessor(TraincardLogExporter(self.writer))
            )
            readers.append(
                PeriodicExportingMetricReader(
                    TraincardMetricExporter(self.writer), export_interval_millis=s.system_interval_s * 1000
                )
            )
        for cls in exporter_classes("traces", s.traces_exporters):
            self.tracer_provider.add_span_processor(BatchSpanProcessor(cls()))
        for cls in exporter_classes("logs", s.logs_exporters):
            self.logger_provider.add_log_record_processor(
                BatchLogRecordProcessor(cls(), max_queue_size=65_536)
            )
        for cls in exporter_classes("metrics", s.metrics_exporters):
            if isinstance(cls, type) and issubclass(cls, MetricReader):
                readers.append(cls())
            else:
                readers.append(
                    PeriodicExportingMetricReader(cls(), export_interval_millis=s.metric_export_interval_ms)
                )
        # Readers beyond the store's own: the step-duration histogram is aggregated only for them.
        self.exports_metrics = len(readers) > (self.writer is not None)
        views = [
            View(
                instrument_name="traincard.step.duration",
                aggregation=ExplicitBucketHistogramAggregation(STEP_DURATION_BUCKETS),
            )
        ]
        self.meter_provider = MeterProvider(
            metric_readers=readers, resource=res, shutdown_on_exit=False, views=views
        )

    def _pipeline_instruments(self, meter: Any) -> None:
        from opentelemetry.metrics import Observation

        def restarts(_options: Any) -> list[Observation]:
            return [Observation(self.attempt)]

        def dropped(_options: Any) -> list[Observation]:
            counts = dict(self.writer.dropped) if self.writer is not None else {}
            if self.reporter.overflow:
                counts["buffer_full"] = counts.get("buffer_full", 0) + self.reporter.overflow
            return [Observation(n, {"traincard.drop.reason": reason}) for reason, n in counts.items()]

        meter.create_observable_gauge("traincard.restarts", callbacks=[restarts], unit="{restart}")
        meter.create_observable_counter("traincard.dropped", callbacks=[dropped], unit="{record}")

    def _start_sampler(self, meter: Any) -> None:
        # One sampler per node: N ranks on a node must not report the node N times.
        if not self.settings.system or self.rank.local_rank != 0:
            return
        from .telemetry import SystemSampler, register_system_instruments

        self.sampler = SystemSampler(self.settings.system_interval_s)
        self.sampler.start()
        register_system_instruments(meter, self.sampler)

    # -- views used by the pump and the writer ---------------------------------------------------
    def last_system(self) -> dict[str, float]:
        snap = self.sampler.latest() if self.sampler is not None else None
        return {s.reading_key: s.value for s in getattr(snap, "samples", ())}

    def gpu_utilization(self) -> list[float]:
        return [v for k, v in self.last_system().items() if k.startswith("hw.gpu.utilization")]

    def state(self) -> dict[str, Any]:
        r = self.reporter
        st: dict[str, Any] = {
            "status": self.status,
            "terminated_by": self.terminated_by,
            "started_at": self.started_at,
            "updated_at": time.time(),
            "heartbeat_at": r.heartbeat_at,
            "step": r.step,
            "progress": dict(r.progress_fields),
            "host": os.uname().nodename,
            "pid": os.getpid(),
            "local_rank": self.rank.local_rank,
            "node_rank": self.rank.node_rank,
            "world_size": self.rank.world_size,
            "pathspec": self.mf.pathspec if self.mf else None,
            "origin_run_id": self.mf.origin_run_id if self.mf else None,
            "hot_path_overflow": r.overflow,
            "hourly_cost": self.settings.hourly_cost,
            "rank_timeout_s": self.settings.rank_timeout_s,
            "notes": list(getattr(self.sampler, "notes", []) or []),
            "last_system": self.last_system(),
        }
        st.update(self.pump.status_fields())
        st.update(self.watchdog.status_fields())
        return st

    # -- lifecycle ------------------------------------------------------------------------------
    def flush(self, timeout_s: float | None = None) -> bool:
        timeout = self.settings.shutdown_timeout_s if timeout_s is None else timeout_s
        self.pump.drain()
        if self.writer is None:
            return True
        return _bounded(self.writer.flush_now, timeout, default=False)

    def shutdown(self, timeout_s: float | None = None, status: str | None = None) -> None:
        global _active
        with _lock:
            if self._closed:
                return
            self._closed = True
            if _active is self:
                _active = None
        deadline = time.monotonic() + (self.settings.shutdown_timeout_s if timeout_s is None else timeout_s)
        try:
            for hook in self.on_shutdown:
                hook()
            self.pump.stop(0.5)
            if self.pump.failure is not None:
                self.status = "failed"
            elif status is not None:
                self.status = status
            elif self.status == "running":
                self.status = "finished"
            end = time.time()
            self.pump.close_open_phases(end)
            if self.status != "failed":  # the failure event itself was emitted when it happened
                attrs = {"traincard.status": self.status}
                if self.terminated_by:
                    attrs["traincard.signal"] = self.terminated_by
                self.reporter.event(f"traincard.run.{self.status}", attrs)
            self.pump.drain()
            self.run_span.set_attribute("traincard.status", self.status)
            if self.status != "failed" and self.status != "finished":
                self.run_span.set_status(Status(StatusCode.ERROR, self.status))
            self.run_span.end(end_time=int(end * 1e9))
            if self.sampler is not None:
                self.sampler.stop(0.5)
            # Collect the store metric reader once more so the last system sample is kept.
            _bounded(lambda: self.meter_provider.force_flush(1000), _left(deadline, 1.0), default=False)
            if self.writer is not None:
                self.writer.close(_left(deadline))
        except Exception as exc:
            report_internal_error("shutdown", exc)
        finally:
            for provider in (self.tracer_provider, self.logger_provider, self.meter_provider):
                # The SDK's own shutdown can take 20-90 s with a dead OTLP endpoint: never wait for it.
                _bounded(provider.shutdown, _left(deadline, 0.2), default=None)


def _left(deadline: float, cap: float | None = None) -> float:
    left = max(0.0, deadline - time.monotonic())
    return min(left, cap) if cap is not None else left


def _bounded(fn: Callable[[], Any], timeout_s: float, default: Any) -> Any:
    """Run ``fn`` on a daemon thread and wait at most ``timeout_s`` for its result."""
    box: list[Any] = [default]

    def run() -> None:
        try:
            box[0] = fn()
        except Exception as exc:
            report_internal_error("bounded call", exc)

    t = threading.Thread(target=run, name="traincard-bounded", daemon=True)
    t.start()
    t.join(timeout_s)
    return box[0]


# -- process-wide hooks ------------------------------------------------------------------------
_hooks_installed = False
_terminate_hooks: list[Callable[[], None]] = []


def add_terminate_hook(fn: Callable[[], None]) -> None:
    """Run ``fn`` (bounded) after the flush on SIGTERM, before the process dies of the signal."""
    _terminate_hooks.append(fn)


_prev_sigterm: Any = None
_prev_excepthook: Any = None


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    pipeline = _active
    if pipeline is not None:
        pipeline.terminated_by = signal.Signals(signum).name
        pipeline.shutdown(status="terminated")
        for hook in list(_terminate_hooks):
            _bounded(hook, 15.0, default=None)
    prev = _prev_sigterm
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _on_uncaught(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    pipeline = _active
    if pipeline is not None and not issubclass(exc_type, KeyboardInterrupt):
        pipeline.reporter.failure(exc)
    (_prev_excepthook or sys.__excepthook__)(exc_type, exc, tb)


def _install_hooks() -> None:
    global _hooks_installed, _prev_sigterm, _prev_excepthook
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(lambda: shutdown())
    _prev_excepthook, sys.excepthook = sys.excepthook, _on_uncaught
    if threading.current_thread() is threading.main_thread():
        _prev_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)


# -- public entry points -------------------------------------------------------------------------
def configure(
    *,
    backend: Backend | None = None,
    metaflow_identity: MetaflowIdentity | None = None,
    **settings: Any,
) -> Reporter:
    """Set up telemetry for this process and return its :class:`Reporter` (idempotent)."""
    global _active
    with _lock:
        if _active is not None:
            return _active.reporter
        resolved = _config.resolve(settings)
        if resolved.sdk_disabled:
            return _disabled_reporter
        mf = metaflow_identity or detect_metaflow()
        if mf is not None and backend is None and not resolved.store:
            mf = _metaflow_datastore(mf)
        rank = detect_rank()
        if backend is None:
            backend = resolve_backend(resolved, mf)
        _active = Pipeline(resolved, mf=mf, rank=rank, backend=backend)
        _install_hooks()
        if metaflow_identity is None and mf is not None and backend is not None:
            _start_card_refresher(_active, backend, mf)
        return _active.reporter


def _start_card_refresher(pipeline: Pipeline, backend: Backend, mf: MetaflowIdentity) -> None:
    """instrument() inside a step with ``@card(type="traincard")`` but without ``@traincard``."""
    from .metaflow.refresher import Refresher, traincard_cards

    if not traincard_cards():
        return
    refresher = Refresher(
        backend, mf.pathspec, pipeline.settings.refresh_interval_s, hourly_cost=pipeline.settings.hourly_cost
    ).start()
    pipeline.on_shutdown.append(refresher.stop)


def active_reporter() -> Reporter | None:
    """The configured reporter of this process, if any."""
    return _active.reporter if _active is not None else None


def shutdown(timeout_s: float | None = None) -> None:
    """Flush and stop telemetry for this process (bounded). Safe to call more than once."""
    pipeline = _active
    if pipeline is not None:
        pipeline.shutdown(timeout_s)


def standalone_writer() -> StoreWriter:
    """The store writer used by exporters created through OTel entry points (no arguments)."""
    settings = _config.resolve()
    backend = resolve_backend(settings, detect_metaflow()) or LocalBackend(default_local_dir())
    writer = StoreWriter(
        backend,
        attempt=settings.attempt or 0,
        rank=detect_rank().rank,
        flush_interval_s=settings.flush_interval_s,
    )
    writer.start()
    atexit.register(writer.close, settings.shutdown_timeout_s)
    return writer
