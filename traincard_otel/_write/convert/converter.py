"""The converter: turns the queue's typed reports into OpenTelemetry signals, off the training thread.

Per-step rows become batched log events (:mod:`.rows`), phases become spans (:mod:`.spans`),
checkpoints and failures become events (:mod:`.events`); values are validated and converted
(tensors, numpy scalars) here. The pipeline calls :meth:`Converter.drain` on its schedule; the
converter has no thread of its own and never calls back into the pipeline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from opentelemetry import trace
from opentelemetry._logs import Logger
from opentelemetry.metrics import Meter
from opentelemetry.trace import Span
from opentelemetry.util.types import AnyValue

from ..._analysis.anomalies import AnomalyRules
from ..._gil import Slices
from ..._safety import internal_error
from ..._schema import (
    CheckpointSaved,
    Event,
    Failure,
    Hyperparameters,
    LifecycleEvent,
    LogLine,
    LogLines,
    MetricsReport,
    PhaseEnd,
    PhaseStart,
    Report,
    StatusSection,
    StepEnd,
    SystemReport,
)
from ..._text import encodable
from ..._types import JsonObject
from ..queue import ReportQueue
from .anomalies import AnomalyWatch
from .events import Checkpoints, FailureRecorder
from .instruments import ConverterInstruments
from .lines import StoreLines, each_line, line_attributes
from .placement import place_after_step_ends, read_sources
from .rows import RowBatcher
from .spans import SEVERITY, EventObserver, PhaseSpans
from .tally import RunTally
from .values import Rejections, safe_value, to_float

_BATCHED_TYPES = (MetricsReport, StepEnd, LogLine, LogLines)
_ROW_TYPES = {MetricsReport, StepEnd}
_LINES = (LogLine, LogLines)


class Converter:
    """Drains a :class:`~traincard_otel._write.queue.ReportQueue` into OTel (thread-safe ``drain``)."""

    def __init__(
        self,
        queue: ReportQueue,
        *,
        tracer: trace.Tracer,
        logger: Logger,
        meter: Meter,
        run_span: Span,
        last_system: Callable[[], Mapping[str, float]],
        timed: bool,
        anomaly_rules: AnomalyRules | None = None,
        store_lines: StoreLines | None = None,
        observer: EventObserver | None = None,
        tally: RunTally | None = None,
        memory_at_oom: Callable[[], JsonObject | None] = lambda: None,
    ) -> None:
        """``store_lines``: log lines go straight to the store, where it is the only reader of log
        records (:mod:`.lines`); ``observer`` is told of every event emitted (the guard rails);
        ``tally`` sums what goes out (this attempt's goodput, its MFU, its summary);
        ``memory_at_oom`` gives the CUDA snapshot's summary taken at an out-of-memory error, if
        any (the failure's verdict shows it)."""
        self.queue = queue
        self.rejections = Rejections()
        self.spans = PhaseSpans(tracer, logger, run_span, observer)
        self.anomalies = AnomalyWatch(self.spans.emit, meter, anomaly_rules)  # judges the rows as they go out
        self.tally = tally
        watches = (self.anomalies,) if tally is None else (self.anomalies, tally)
        self.rows = RowBatcher(self.spans.emit, self.rejections, self._record_durations, watches)
        self.instruments = ConverterInstruments(
            meter,
            queue,
            last_metrics=lambda: self.rows.last_metrics,
            step_ends=lambda: self.rows.step_ends,
            rejected=lambda: self.rejections.counts,
            checkpoint_size=lambda: self.checkpoints.last_size,
            throughput=self.rows.last_throughput,
        )
        self._timed = timed  # a metric backend reads the step histogram
        self.checkpoints = Checkpoints(self.spans, self.instruments.checkpoints)
        self.failures = FailureRecorder(
            self.spans,
            self.instruments.failures,
            last_system,
            lambda: self.rows.last_metrics,
            lambda: queue.step,
            memory_at_oom,
        )
        self._last_step_end: tuple[object, float] | None = None  # (step, time), kept for metric sources
        self.store_lines = store_lines
        self._lock = threading.Lock()

    def _record_durations(self, durations: list[float], parts: Sequence[float] | None) -> None:
        if self._timed:
            for duration in durations:
                self.instruments.step_duration.record(duration)
            if parts:
                self.instruments.record_parts(durations, parts)

    def drain(self) -> None:
        """Translate everything queued so far, in report order."""
        with self._lock:
            q = self.queue
            q.sync_clocks()
            # The sources before the queue: what they hold was reported after its step end, so
            # that step end is in this drain or an earlier one.
            read = read_sources(q.metric_sources, self.rejections.reject) if q.metric_sources else None
            items = q.drain()
            if read is not None:
                last_end = next((item for item in reversed(items) if type(item) is StepEnd), None)
                if read:
                    items = place_after_step_ends(items, read, self._last_step_end)
                if last_end is not None:
                    self._last_step_end = (last_end.step, last_end.t)
            if set(map(type, items)) <= _ROW_TYPES:  # per-step rows alone: one stretch
                if items:
                    self.rows.add(items, self._error)  # type: ignore[arg-type]
                self._flush_rows([])
                return
            # Log lines do not end a stretch of rows: a line printed every step (a Trainer's
            # printer) would otherwise cut the rows into a batch per step, an SDK record per row.
            # They follow the stretch's rows out, before the next event.
            lines: list[LogLine | LogLines] = []
            start, n = 0, len(items)
            slices = Slices()  # a drain of many reports gives the GIL away now and then
            while start < n:
                slices.check()
                end = start
                rows: list[MetricsReport | StepEnd] = []
                while end < n and type(items[end]) in _BATCHED_TYPES:
                    item = items[end]
                    if type(item) in _LINES:
                        lines.append(item)  # type: ignore[arg-type]
                    else:
                        rows.append(item)  # type: ignore[arg-type]
                    end += 1
                if end > start:
                    if rows:
                        self.rows.add(rows, self._error)
                    start = end
                    continue
                self._flush_rows(lines)  # keep rows and events in report order
                try:
                    self._handle(items[start])
                except Exception as exc:
                    self._error(exc)
                start += 1
            self._flush_rows(lines)

    def _flush_rows(self, lines: list[LogLine | LogLines]) -> None:
        """Emit the batched rows, then the log lines held beside them (emptying ``lines``)."""
        try:
            self.rows.flush()
        except Exception as exc:
            self._error(exc)
        if lines and self.store_lines is not None:
            try:
                self.store_lines.write(lines)
            except Exception as exc:
                self._error(exc)
        else:  # through the SDK: one OTel log record a line, as collectors expect
            for item in lines:
                for line in each_line(item) if type(item) is LogLines else (item,):
                    try:
                        self._handle(line)
                    except Exception as exc:
                        self._error(exc)
        lines.clear()

    def send_lines_through_sdk(self) -> None:
        """Another log processor was attached: log lines go through the SDK to reach it too."""
        with self._lock:
            self.store_lines = None

    @staticmethod
    def _error(exc: Exception) -> None:
        internal_error("converter", exc)

    def _handle(self, item: Report) -> None:
        """A report other than per-step rows (those are batched)."""
        emit = self.spans.emit
        if type(item) is LogLine:
            level = item.level
            attrs: dict[str, AnyValue] = line_attributes(item)  # type: ignore[assignment]
            emit(item.t, None, encodable(item.line), attrs, SEVERITY.get(level, SEVERITY["INFO"]), level)
        elif type(item) is PhaseStart:
            name = encodable(item.name)
            self.spans.start(item.t, name, item.token, item.step)
            if self.tally is not None:
                self.tally.phase_started(item.t, name, item.token)
        elif type(item) is PhaseEnd:
            self.spans.end(item.t, item.token, item.error)
            if self.tally is not None:
                self.tally.phase_ended(item.t, item.token)
        elif type(item) is CheckpointSaved:
            self.checkpoints.record(
                item._replace(path=encodable(item.path), metadata=safe_value(item.metadata))
            )
        elif type(item) is SystemReport:
            clean = {encodable(str(k)): f for k, v in item.stats.items() if (f := to_float(v)) is not None}
            emit(item.t, Event.SYSTEM, clean)
        elif type(item) is Hyperparameters:
            values = safe_value(item.values)
            emit(item.t, Event.HYPERPARAMS, values)
            if self.tally is not None:
                self.tally.hyperparameters(values)
        elif type(item) is LifecycleEvent:
            name, attributes = encodable(str(item.name)), _attributes(item.attributes)
            emit(item.t, name, safe_value(item.body), attributes)
            if self.tally is not None:
                self.tally.event(item.t, name, attributes)
        elif type(item) is Failure:
            self.failures.record(item)

    def close_open_phases(self, t: float) -> None:
        with self._lock:
            self.spans.close_all(t)
            if self.tally is not None:
                self.tally.phases_closed(t)

    def status_fields(self) -> StatusSection:
        """This converter's part of the rank's status snapshot."""
        return {
            "last_metrics": dict(self.rows.last_metrics),
            "rejected": dict(self.rejections.counts),
            "failure": self.failures.summary,
            "checkpoints": self.checkpoints.count,
            "phase": self.spans.current,
            "anatomy": self.rows.recent_anatomy(),
        }


def _attributes(attributes: Mapping[str, object]) -> dict[str, AnyValue]:
    """Event attributes as OTel takes them: text keys; a value OTel cannot hold becomes its text."""
    out: dict[str, AnyValue] = {}
    for key, value in attributes.items():
        value = safe_value(value)
        if not isinstance(value, (str, bool, int, float)) and not (
            isinstance(value, list) and all(isinstance(v, (str, bool, int, float)) for v in value)
        ):
            value = encodable(repr(value))
        elif isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            value = str(value)  # OTLP carries 64-bit ints
        out[encodable(str(key))] = value
    return out
