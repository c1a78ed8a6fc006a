"""Agent loops from standard spans: GenAI-convention spans of the global tracer provider.

With the ``genai`` setting, a span processor joins the process's global tracer provider (the one
the OpenAI, Anthropic or LangChain instrumentations, or the user's own code, create spans through):
added to an SDK provider that is there already, or to a new one set as the global provider only
when none was set. The user's provider is never replaced, and its processors and exporters go on
as before. This is the one place the package touches a global provider (our own signals stay on
private providers); a provider the user sets *after* ours cannot replace it (the OTel API allows
one), so set yours up before ``configure(genai=True)``.

Each ended span with a ``gen_ai.operation.name`` becomes one ``traincard.genai.span`` event (its
GenAI attributes, times, ids and status), queued like any report: the processor runs on the
thread that ended the span and does two deque appends. LLM calls are also recorded on
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` (by :meth:`record_pending`,
on the pipeline's schedule thread before each drain: three histogram records cost the span's
thread about 70 µs), unless the span's instrumentation is one of OpenTelemetry's own, which
records them itself. Attributes follow the
GenAI conventions at :data:`~traincard_otel._schema.GENAI_SEMCONV_VERSION`.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import StatusCode

from ..._safety import internal_error
from ..._schema import Attr, Event, GenAI, LifecycleEvent, Metric
from ..._types import Reported
from ..queue import ReportQueue

#: Operations that are not a call to a model.
_NOT_MODEL_CALLS = frozenset({GenAI.INVOKE_AGENT, GenAI.EXECUTE_TOOL, "create_agent"})


class GenAISpanProcessor(SpanProcessor):
    """Queues each ended GenAI span as an event; records the client metrics of model calls."""

    def __init__(self, queue: ReportQueue, meter: Meter) -> None:
        self.queue = queue
        self.closed = False
        # (attributes, input tokens, output tokens, duration) of model calls not yet recorded
        self.pending: collections.deque[tuple[dict[str, str], Reported, Reported, float]] = (
            collections.deque()
        )
        m = Metric.GENAI_TOKEN_USAGE
        self.tokens: Histogram = meter.create_histogram(m.name, unit=m.unit, description=m.meaning)
        m = Metric.GENAI_OPERATION_DURATION
        self.duration: Histogram = meter.create_histogram(m.name, unit=m.unit, description=m.meaning)

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if self.closed:
            return
        attrs = span.attributes or {}
        operation = attrs.get(GenAI.OPERATION_NAME)
        if operation is None:
            return
        try:
            self._capture(span, str(operation), attrs)
        except Exception as exc:  # the user's span must end regardless
            internal_error("genai.span", exc)

    def _capture(self, span: ReadableSpan, operation: str, attrs: Mapping[str, Reported]) -> None:
        kept = {k: v for k, v in attrs.items() if k.startswith(GenAI.PREFIX) or k == Attr.ERROR_TYPE}
        failed = span.status.status_code is StatusCode.ERROR
        if failed and Attr.ERROR_TYPE not in kept:
            kept[Attr.ERROR_TYPE] = _exception_type(span) or "error"
        ctx, parent = span.context, span.parent
        scope = span.instrumentation_scope.name if span.instrumentation_scope else ""
        t0 = (span.start_time or 0) / 1e9
        t1 = (span.end_time or 0) / 1e9 or time.time()
        body = {
            "name": span.name,
            "t0": t0,
            "t1": t1,
            "trace": f"{ctx.trace_id:032x}" if ctx else None,
            "span": f"{ctx.span_id:016x}" if ctx else None,
            "parent": f"{parent.span_id:016x}" if parent else None,
            "error": failed,
            "scope": scope,
        }
        self.queue.put(LifecycleEvent(t1, Event.GENAI_SPAN, kept, body))
        if operation in _NOT_MODEL_CALLS or scope.startswith(GenAI.METRIC_SCOPES):
            return
        point: dict[str, str] = {GenAI.OPERATION_NAME: operation}
        model = attrs.get(GenAI.REQUEST_MODEL) or attrs.get(GenAI.RESPONSE_MODEL)
        if model is not None:
            point[GenAI.REQUEST_MODEL] = str(model)
        if failed:
            point[Attr.ERROR_TYPE] = str(kept[Attr.ERROR_TYPE])
        if len(self.pending) < self.queue.cap:
            self.pending.append(
                (point, attrs.get(GenAI.INPUT_TOKENS), attrs.get(GenAI.OUTPUT_TOKENS), t1 - t0)
            )
        else:
            self.queue.overflow += 1

    def record_pending(self) -> None:
        """Record the model calls ended since the last call on the client histograms."""
        pending = self.pending
        while pending:
            point, tokens_in, tokens_out, duration = pending.popleft()
            error = point.pop(Attr.ERROR_TYPE, None)
            for n, kind in ((tokens_in, "input"), (tokens_out, "output")):
                if isinstance(n, (int, float)) and not isinstance(n, bool):
                    self.tokens.record(n, {**point, GenAI.TOKEN_TYPE: kind})
            if error is not None:
                point[Attr.ERROR_TYPE] = error
            self.duration.record(max(duration, 0.0), point)

    def shutdown(self) -> None:
        self.closed = True  # an SDK provider cannot drop a processor: ours goes inert
        try:
            self.record_pending()
        except Exception as exc:
            internal_error("genai.metrics", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _exception_type(span: ReadableSpan) -> str | None:
    for event in span.events:
        found = (event.attributes or {}).get(Attr.EXCEPTION_TYPE)
        if found is not None:
            return str(found)
    return None


def capture_genai_spans(queue: ReportQueue, meter: Meter) -> GenAISpanProcessor:
    """Add a :class:`GenAISpanProcessor` to the global tracer provider (see the module docstring);
    ``shutdown()`` it when the pipeline ends."""
    processor = GenAISpanProcessor(queue, meter)
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # none set yet (the API's proxy): set one
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    add = getattr(provider, "add_span_processor", None)
    if add is None:  # a provider of another SDK
        internal_error(
            "genai",
            TypeError(f"the global tracer provider {type(provider).__name__} takes no span processor"),
        )
    else:
        add(processor)
    return processor
