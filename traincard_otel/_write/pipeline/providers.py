"""The private OTel providers of one process, with the store exporters and the env-selected ones.

Providers are never set globally (Metaflow's own tracing, or user code, may own the globals).
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader, MetricsData
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from ..._config import Settings
from ..._schema import Metric
from ..export.otlp import exporter_classes
from ..export.store import StoreLogProcessor, TraincardMetricExporter, TraincardSpanExporter
from ..store.writer import StoreWriter
from .children import ParentOnlyPeriodicReader

STEP_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# A part of a step is shorter than the step: the buckets start at 0.1 ms.
STEP_PART_BUCKETS = (
    0.0001,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class SampleReader(MetricReader):
    """The store's metric reader: collected by the system sampler right after each sample.

    One stored point per sample, in sampling order: a reader on a timer of its own drifts against
    the sampler, storing one sample twice or missing one. No thread, so nothing for a forked child
    to restart.
    """

    def __init__(self, exporter: MetricExporter) -> None:
        super().__init__()
        self._exporter = exporter

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
    ) -> None:
        self._exporter.export(metrics_data, timeout_millis=timeout_millis)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True  # every sample was exported as it was taken: a collection now would repeat one

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        self._exporter.shutdown(timeout_millis=timeout_millis)


@dataclass(frozen=True)
class Providers:
    tracer_provider: TracerProvider
    logger_provider: LoggerProvider
    meter_provider: MeterProvider
    exports_metrics: bool  # a metric backend beyond the store reads the training instruments
    exports_logs: bool  # a log exporter beyond the store reads the log records
    store_reader: SampleReader | None

    def all(self) -> tuple[TracerProvider, LoggerProvider, MeterProvider]:
        return self.tracer_provider, self.logger_provider, self.meter_provider


def build_providers(settings: Settings, resource: Resource, writer: StoreWriter | None) -> Providers:
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    readers: list[MetricReader] = []
    store_reader = None
    if writer is not None:
        # The store exporters run synchronously on the schedule's thread: export() only appends
        # to memory, and no SDK queue sits between the converter and the store that could drop rows.
        tracer_provider.add_span_processor(SimpleSpanProcessor(TraincardSpanExporter(writer)))
        logger_provider.add_log_record_processor(StoreLogProcessor(writer))
        store_reader = SampleReader(TraincardMetricExporter(writer))
        readers.append(store_reader)
    for cls in exporter_classes("traces", settings.traces_exporters):
        tracer_provider.add_span_processor(BatchSpanProcessor(cls()))
    log_exporters = exporter_classes("logs", settings.logs_exporters)
    for cls in log_exporters:
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(cls(), max_queue_size=65_536))
    for cls in exporter_classes("metrics", settings.metrics_exporters):
        if isinstance(cls, type) and issubclass(cls, MetricReader):
            readers.append(cls())
        else:
            readers.append(
                ParentOnlyPeriodicReader(cls(), export_interval_millis=settings.metric_export_interval_ms)
            )
    views = [
        View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(buckets))
        for name, buckets in (
            (Metric.STEP_DURATION.name, STEP_DURATION_BUCKETS),
            (Metric.STEP_PART_DURATION.name, STEP_PART_BUCKETS),
        )
    ]
    meter_provider = MeterProvider(
        metric_readers=readers, resource=resource, shutdown_on_exit=False, views=views
    )
    return Providers(
        tracer_provider,
        logger_provider,
        meter_provider,
        exports_metrics=len(readers) > (writer is not None),
        exports_logs=bool(log_exporters),
        store_reader=store_reader,
    )
