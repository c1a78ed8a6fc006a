"""Phases as spans created after the fact, and log records emitted inside the open phase.

The converter starts ``training.<phase>`` spans with the time the training thread recorded and
ends them likewise: real durations, no OTel call on the training thread, and still children of
``training.run``, which joins whatever trace context was current at set-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AnyValue

from ..._safety import internal_error
from ..._schema import PHASE_SPAN_PREFIX, Attr

#: Told of an event after it was emitted: (time, event name or None for a log line, body, attributes).
EventObserver = Callable[[float, str | None, AnyValue, Mapping[str, AnyValue]], None]

SEVERITY = {
    "DEBUG": SeverityNumber.DEBUG,
    "INFO": SeverityNumber.INFO,
    "WARNING": SeverityNumber.WARN,
    "ERROR": SeverityNumber.ERROR,
    "CRITICAL": SeverityNumber.FATAL,
}


def ns(t: float) -> int:
    return int(t * 1e9)


class PhaseSpans:
    """Open phase spans by token; log records go into the innermost one (else ``training.run``)."""

    def __init__(
        self, tracer: trace.Tracer, logger: Logger, run_span: Span, observer: EventObserver | None = None
    ) -> None:
        """``observer`` is told of every event emitted, after it was (the guard rails watch
        anomalies and failures)."""
        self.tracer, self.logger, self.run_span = tracer, logger, run_span
        self._spans: dict[int, Span] = {}
        self._names: dict[int, str] = {}
        self._context: otel_context.Context | None = None  # the innermost span's, until one starts or ends
        self.failed_phase: str | None = None  # a phase that ended with an exception
        self.observer = observer

    @property
    def current(self) -> str | None:
        return self._names[max(self._names)] if self._names else None

    def innermost(self) -> Span:
        return self._spans[max(self._spans)] if self._spans else self.run_span

    def start(self, t: float, name: str, token: int, step: int | None) -> None:
        span = self.tracer.start_span(
            f"{PHASE_SPAN_PREFIX}{name}",
            context=trace.set_span_in_context(self.run_span),
            start_time=ns(t),
            attributes={Attr.PHASE: name, Attr.STEP: step if type(step) is int else 0},
        )
        self._spans[token], self._names[token] = span, name
        self._context = None

    def end(self, t: float, token: int, err: tuple[str, str] | None) -> None:
        span = self._spans.pop(token, None)
        name = self._names.pop(token, None)
        self._context = None
        if span is None:
            return
        if err:
            self.failed_phase = name
            span.set_status(Status(StatusCode.ERROR, f"{err[0]}: {err[1]}"))
        span.end(end_time=ns(t))

    def close_all(self, t: float) -> None:
        for token in sorted(self._spans, reverse=True):
            self._spans.pop(token).end(end_time=ns(t))
        self._names.clear()
        self._context = None

    def emit(
        self,
        t: float,
        event: str | None,
        body: AnyValue,
        attributes: Mapping[str, AnyValue] | None = None,
        severity: SeverityNumber = SeverityNumber.INFO,
        severity_text: str = "INFO",
    ) -> None:
        """One OTel log record (an event when ``event`` is given) in the innermost open phase."""
        context = self._context
        if context is None:
            context = self._context = trace.set_span_in_context(self.innermost())
        self.logger.emit(
            timestamp=ns(t),
            context=context,
            severity_number=severity,
            severity_text=severity_text,
            body=body,
            attributes=dict(attributes or {}),
            event_name=event,
        )
        if event is not None and self.observer is not None:
            try:
                self.observer(t, event, body, attributes or {})
            except Exception as exc:
                internal_error("guard rails", exc)
