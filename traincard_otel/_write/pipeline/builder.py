"""Builds one process's :class:`~.lifecycle.Pipeline`: each part made once, in the order the parts
need each other, and handed to the next through its constructor.

queue and store writer -> providers (exporters into the writer) -> run span -> system sampler ->
guard rails and profile captures (which watch the converter's events) -> CUDA memory history ->
converter -> the pipeline's own instruments -> GenAI span capture -> insight gauges (this attempt's
goodput and MFU, from the converter's tally) -> the gang's watch (on a gang's control node) ->
watchdog (which reads the converter's step times, and answers the store's requests). Building
starts nothing: no thread, no hook, no event (:meth:`Pipeline.start` does).
"""

from __future__ import annotations

import os
import time
from functools import partial
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry.metrics import CallbackOptions, Meter, NoOpMeter, Observation
from opentelemetry.sdk.resources import Resource

from ..._config import Settings
from ..._identity import ENV_LAUNCHER_PID, MetaflowIdentity, RankIdentity, resource_attributes
from ..._safety import internal_error
from ..._schema import RUN_SPAN, Attr, Metric
from ..._schema.records import GENAI_PRICES_FIELD
from ..._store.backends import Backend
from ..._version import __version__
from ..convert import Converter
from ..convert.anomalies import parse_rules
from ..convert.instruments import health_instruments
from ..convert.lines import StoreLines
from ..convert.tally import RunTally
from ..queue import ReportQueue
from ..store.writer import StoreWriter
from ..telemetry.gang_watch import GangWatch
from ..telemetry.health import Watchdog
from ..telemetry.memory_history import MemoryHistory
from ..telemetry.stack_watch import Emit
from .genai import capture_genai_spans
from .guards import Guards, notified_kinds
from .insight_gauges import InsightGauges
from .lifecycle import SCOPE, Pipeline, gpu_utilization, last_system, lifecycle_event
from .notify import Notifier
from .profiling import Profiling, observers
from .providers import build_providers

if TYPE_CHECKING:
    from ..telemetry import SystemSampler


def build_pipeline(
    settings: Settings, *, mf: MetaflowIdentity | None, rank: RankIdentity, backend: Backend | None
) -> Pipeline:
    """The pipeline for ``settings`` in this process (``mf``: the Metaflow task it runs in;
    ``backend``: its store, None for none), built and not started.

    Raises:
        ConfigError: the anomaly rules' text is invalid (before anything is made).
    """
    anomaly_rules = parse_rules(settings.anomalies)  # a bad rule fails before anything starts
    started_at = time.time()  # before the run span starts: the run's start, as the store tells it
    attempt = mf.retry_count if mf else (settings.attempt or 0)
    queue = ReportQueue(settings.buffer_cap, report_metrics=rank.rank == 0 or settings.report_ranks == "all")
    writer = (
        StoreWriter(
            backend,
            attempt=attempt,
            rank=rank.rank,
            flush_interval_s=settings.flush_interval_s,
            max_pending=settings.buffer_cap,
        )
        if backend is not None
        else None
    )
    resource = Resource.create(resource_attributes(mf, rank, settings.service_name))
    providers = build_providers(settings, resource, writer)
    tracer = providers.tracer_provider.get_tracer(SCOPE, __version__)
    run_span = tracer.start_span(
        RUN_SPAN, context=otel_context.get_current(), attributes={Attr.ATTEMPT: attempt}
    )
    meter = providers.meter_provider.get_meter(SCOPE, __version__)
    # The run's own figures are in the store's rows, events and status already; as metrics they
    # serve metric backends only, and collecting them for the store alone would double the metric
    # reader's work (docs/schema.md).
    run_meter: Meter = meter if providers.exports_metrics else NoOpMeter(SCOPE, __version__)
    sampler = _sampler(settings, rank, meter)
    event = lifecycle_event(queue)
    guards = _guards(settings, mf, rank, backend, event)
    armed = guards.stop_on or guards.notifier is not None
    profiling = (  # nothing to ask or write without a store
        Profiling(settings.profile_on, queue, backend, rank=rank.rank, attempt=attempt, emit=event)
        if backend is not None
        else None
    )
    memory = (  # CUDA allocations recorded, for the snapshot at an out-of-memory error
        MemoryHistory(backend, rank=rank.rank, attempt=attempt, emit=event, step=lambda: queue.step)
        if settings.memory_history
        else None
    )
    tally = RunTally(started_at, rank=rank.rank, attempt=attempt)
    converter = Converter(
        queue,
        tracer=tracer,
        logger=providers.logger_provider.get_logger(SCOPE, __version__),
        meter=run_meter,
        run_span=run_span,
        last_system=partial(last_system, sampler),
        timed=providers.exports_metrics,
        anomaly_rules=anomaly_rules,
        store_lines=StoreLines(writer) if writer is not None and not providers.exports_logs else None,
        observer=observers(
            guards.observe if armed else None,
            profiling.observe if profiling is not None and set(settings.profile_on) - {"straggler"} else None,
        ),
        tally=tally,
        memory_at_oom=(lambda: memory.at_oom) if memory is not None else lambda: None,
    )
    _pipeline_instruments(run_meter, attempt, queue, writer)
    genai = capture_genai_spans(queue, run_meter) if settings.genai else None  # from the global provider
    if genai is not None and settings.genai_prices:
        queue.progress[GENAI_PRICES_FIELD] = settings.genai_prices
    insight_gauges = InsightGauges(  # goodput from rank 0, whose timeline is the run's
        run_meter,
        goodput=(lambda: tally.goodput(time.time(), running=tally.running)) if rank.rank == 0 else None,
        efficiency=lambda: tally.efficiency(queue.progress),
    )
    gang_watch = GangWatch.on_control_node(backend, rank, event, insight_gauges.gang.publish)
    watchdog = Watchdog(
        progress=lambda: (queue.step, queue.heartbeat_at),
        recent_step_times=converter.rows.recent_durations,
        recent_wait_shares=converter.rows.recent_wait_shares,
        gpu_utilization=partial(gpu_utilization, sampler),
        emit=event,
        backend=backend,
        rank=rank.rank,
        world_size=rank.world_size,
        attempt=attempt,
        host=os.uname().nodename,
        stall_floor_s=settings.stall_timeout_s,
        rank_timeout_s=settings.rank_timeout_s,
        rank_check_s=max(1.0, min(5.0, settings.rank_timeout_s / 2)),
        gang_check=gang_watch.check if gang_watch is not None else None,
        on_profile_request=profiling.request if profiling is not None else None,
        # a straggler, which only the ranks' states together show, is rank 0's to find
        on_states=profiling.states
        if profiling is not None and rank.rank == 0 and "straggler" in settings.profile_on
        else None,
    )
    health_instruments(run_meter, watchdog.status_fields)
    return Pipeline(
        settings,
        mf=mf,
        rank=rank,
        backend=backend,
        attempt=attempt,
        queue=queue,
        writer=writer,
        providers=providers,
        run_span=run_span,
        converter=converter,
        sampler=sampler,
        watchdog=watchdog,
        guards=guards,
        genai=genai,
        insight_gauges=insight_gauges,
        tally=tally,
        gang_watch=gang_watch,
        started_at=started_at,
        profiling=profiling,
        memory=memory,
    )


def _sampler(settings: Settings, rank: RankIdentity, meter: Meter) -> SystemSampler | None:
    """The node's system sampler with its instruments; one per node (N ranks on a node must not
    report the node N times), none where ``system`` is off."""
    if not settings.system or rank.local_rank != 0:
        return None
    try:
        from ..telemetry import SystemSampler, register_system_instruments

        sampler = SystemSampler(settings.system_interval_s)
        register_system_instruments(meter, sampler)
    except Exception as exc:
        internal_error("system sampler", exc)
        return None
    return sampler


def _guards(
    settings: Settings, mf: MetaflowIdentity | None, rank: RankIdentity, backend: Backend | None, event: Emit
) -> Guards:
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
    where = mf.pathspec if mf else (backend.spec if backend is not None else None)
    return Guards(settings, emit=event, notifier=notifier, rank=rank.rank, run=where, card=where)


def _pipeline_instruments(meter: Meter, attempt: int, queue: ReportQueue, writer: StoreWriter | None) -> None:
    """The pipeline's own figures: restarts, dropped records, failed store writes."""

    def restarts(_options: CallbackOptions) -> list[Observation]:
        return [Observation(attempt)]

    def dropped(_options: CallbackOptions) -> list[Observation]:
        counts = dict(writer.dropped) if writer is not None else {}
        if queue.overflow:
            counts["buffer_full"] = counts.get("buffer_full", 0) + queue.overflow
        return [Observation(n, {Attr.DROP_REASON: reason}) for reason, n in counts.items()]

    def write_errors(_options: CallbackOptions) -> list[Observation]:
        return [Observation(writer.write_errors)] if writer is not None else []

    for spec, kind, cb in (
        (Metric.RESTARTS, "gauge", restarts),
        (Metric.DROPPED, "counter", dropped),
        (Metric.STORE_WRITE_ERRORS, "counter", write_errors),
    ):
        create = meter.create_observable_gauge if kind == "gauge" else meter.create_observable_counter
        create(spec.name, callbacks=[cb], unit=spec.unit, description=spec.meaning)
