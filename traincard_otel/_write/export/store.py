"""OTel SDK exporters whose sink is the telemetry store (what the card reads).

They are ordinary span / log-record / metric exporters of the one pipeline, so the card sees
exactly what OTLP users see. Each converts SDK objects into compact store records (documented in
``docs/architecture.md``) and hands them to a :class:`~traincard_otel._write.store.writer.StoreWriter`;
``export`` never does I/O and never raises.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LogRecordProcessor, ReadableLogRecord, ReadWriteLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    Sum,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from ..._safety import internal_error
from ..._schema import NOT_STORED_METRICS, Event, StoreKind
from ..._store import segment
from ..._store.segment import Record
from ..store.writer import StoreWriter

_default_writer: StoreWriter | None = None
_default_lock = threading.Lock()


def _flush_if_owned(writer: StoreWriter) -> bool:
    """Exporters built by entry points own the shared writer: the SDK's flush/shutdown drives it.

    (Inside :func:`traincard_otel.configure` the pipeline flushes its own writer instead.)
    """
    if writer is _default_writer:
        return writer.flush_now()
    return True


def _writer_or_default(writer: StoreWriter | None) -> StoreWriter:
    """The exporters built by OTel entry points (no arguments) share one writer per process."""
    global _default_writer
    if writer is not None:
        return writer
    with _default_lock:
        if _default_writer is None:
            _default_writer = _standalone_writer()
        return _default_writer


def _standalone_writer() -> StoreWriter:
    """The store writer of exporters created through OTel entry points (no pipeline around them)."""
    import atexit

    from ... import _config
    from ..._identity import detect_metaflow, detect_rank
    from ..._store.backends import LocalBackend
    from ..store.where import default_local_dir, resolve_backend

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


def _seconds(ns: int | None) -> float:
    return (ns or 0) / 1e9


def _attrs(attributes: Mapping[str, object] | None) -> dict[str, object]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in (attributes or {}).items()}


def _runs(event: str | None, body: object) -> list[Record] | None:
    """The packed runs of a converter's batched per-step event, or None if ``body`` is not one."""
    if not isinstance(body, Mapping):
        return None
    try:
        if event == Event.METRICS:
            return [
                segment.metric_run(r["phase"], r["names"], r["steps"], r["times"], r["values"], r.get("tags"))
                for r in body["runs"]
            ]
        if event == Event.STEP_TIMING:
            return [
                segment.step_run(
                    body["steps"],
                    body["times"],
                    body["durations"],
                    body["waits"],
                    body["samples"],
                    body["tokens"],
                    parts=body.get("parts"),
                )
            ]
    except (KeyError, TypeError, ValueError):
        return None  # not ours after all: stored as an ordinary event
    return None


def log_record_to_records(rec: LogRecord) -> list[Record]:
    """Store records for one log record; a batched per-step event becomes packed runs."""
    if rec.event_name in (Event.METRICS, Event.STEP_TIMING):
        runs = _runs(rec.event_name, rec.body)
        if runs is not None:
            return runs
    return [log_record_to_record(rec)]


def log_record_to_record(rec: LogRecord) -> Record:
    t = _seconds(rec.timestamp or rec.observed_timestamp)
    body = rec.body
    if rec.event_name:
        out: Record = {"k": StoreKind.EVENT, "t": t, "n": rec.event_name, "a": _attrs(rec.attributes)}
        if body is not None:
            out["b"] = body
        return out
    return log_line_record(t, rec.severity_text, str(body), rec.attributes)


def log_line_record(
    t: float, level: str | None, message: str, attributes: Mapping[str, object] | None
) -> Record:
    """The store's record of one log line (a log record without an event name)."""
    return {"k": StoreKind.LOG, "t": t, "lvl": level or "INFO", "msg": message, "a": _attrs(attributes)}


def span_to_record(span: ReadableSpan) -> Record:
    status = "error" if span.status.status_code is StatusCode.ERROR else "ok"
    return {
        "k": StoreKind.SPAN,
        "n": span.name,
        "t0": _seconds(span.start_time),
        "t1": _seconds(span.end_time),
        "st": status,
        "a": _attrs(span.attributes),
        "ev": [{"n": e.name, "t": _seconds(e.timestamp), "a": _attrs(e.attributes)} for e in span.events],
    }


def metrics_to_records(data: MetricsData) -> list[Record]:
    out: list[Record] = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name in NOT_STORED_METRICS:
                    continue
                kind = type(metric.data)
                for point in metric.data.data_points:
                    rec: Record = {
                        "k": StoreKind.METRIC_POINT,
                        "t": _seconds(point.time_unix_nano),
                        "n": metric.name,
                        "u": metric.unit,
                    }
                    if point.attributes:
                        rec["a"] = _attrs(point.attributes)
                    if kind is Histogram:
                        rec["c"], rec["v"] = point.count, point.sum  # type: ignore[union-attr]
                    elif kind in (Gauge, Sum):
                        rec["v"] = point.value  # type: ignore[union-attr]
                    else:
                        continue
                    out.append(rec)
    return out


def _store_log_records(writer: StoreWriter, batch: Iterable[LogRecord]) -> None:
    records: list[Record] = []
    for rec in batch:
        if rec.event_name == Event.STATUS and isinstance(rec.body, Mapping):
            writer.set_state(rec.body)  # kept as the rank's state file
        else:
            records += log_record_to_records(rec)
    writer.add_many(records)


class TraincardLogExporter(LogRecordExporter):
    """Log-record exporter writing per-step rows, events and log lines into the store."""

    def __init__(self, writer: StoreWriter | None = None) -> None:
        self._writer = _writer_or_default(writer)

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            _store_log_records(self._writer, (r.log_record for r in batch))
        except Exception as exc:
            internal_error("store log exporter", exc)
            return LogRecordExportResult.FAILURE
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return _flush_if_owned(self._writer)

    def shutdown(self) -> None:
        _flush_if_owned(self._writer)


class StoreLogProcessor(LogRecordProcessor):
    """The pipeline's log-record processor for the store: each record into the writer as it is
    emitted, on the emitting thread.

    What ``SimpleLogRecordProcessor(TraincardLogExporter(writer))`` does, less its per-record
    work that only matters for exporters doing I/O (a context attached to suppress
    instrumentation, a readable copy of the record): the store's ``add_many`` only appends to
    memory. A console line printed every step pays this per line.
    """

    def __init__(self, writer: StoreWriter) -> None:
        self._writer = writer

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        try:
            _store_log_records(self._writer, (log_record.log_record,))
        except Exception as exc:
            internal_error("store log processor", exc)

    def shutdown(self) -> None:
        pass  # the pipeline closes its writer itself

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class TraincardSpanExporter(SpanExporter):
    """Span exporter writing the run and phase spans into the store."""

    def __init__(self, writer: StoreWriter | None = None) -> None:
        self._writer = _writer_or_default(writer)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            self._writer.add_many([span_to_record(s) for s in spans])
        except Exception as exc:
            internal_error("store span exporter", exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        _flush_if_owned(self._writer)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return _flush_if_owned(self._writer)


class TraincardMetricExporter(MetricExporter):
    """Metric exporter writing system, GPU and training metric points into the store."""

    def __init__(self, writer: StoreWriter | None = None) -> None:
        super().__init__()
        self._writer = _writer_or_default(writer)

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
    ) -> MetricExportResult:
        try:
            self._writer.add_many(metrics_to_records(metrics_data))
        except Exception as exc:
            internal_error("store metric exporter", exc)
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return _flush_if_owned(self._writer)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        _flush_if_owned(self._writer)
