"""Checkpoints and failures: what the converter records about them, and as which signals."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from opentelemetry._logs import SeverityNumber
from opentelemetry.metrics import Counter
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AnyValue

from ..._analysis.memory import evidence as oom_evidence
from ..._schema import Attr, CheckpointSaved, Event, Failure
from ..._text import encodable
from ..._types import JsonObject
from ..telemetry.failure import classify
from .spans import PhaseSpans, ns
from .values import dir_size, to_float


class Checkpoints:
    """Checkpoint events (log-based, mirrored as span events), their size and the best one."""

    def __init__(self, spans: PhaseSpans, counter: Counter) -> None:
        self._spans, self._counter = spans, counter
        self.count = 0
        self.last_size: int | None = None
        self._best: tuple[str, float, bool] | None = None  # metric, value, greater_is_better

    def _is_best(self, meta: Mapping[str, object], metric: object, value: float | None) -> bool:
        best = meta.get("best")
        if best is not None:
            return bool(best)
        if not metric or value is None:
            return False
        greater = bool(meta.get("greater_is_better", False))
        if self._best is None or self._best[0] != metric:
            best = True
        else:
            best = value > self._best[1] if greater else value < self._best[1]
        if best:
            self._best = (str(metric), value, greater)
        return best

    def record(self, item: CheckpointSaved) -> None:
        t, path, step, meta = item
        size = dir_size(path)
        metric, value = meta.get("metric"), to_float(meta.get("value"))
        best = self._is_best(meta, metric, value)
        attrs: dict[str, AnyValue] = {
            Attr.CHECKPOINT_PATH: path,
            Attr.STEP: step if type(step) is int else -1,
            Attr.CHECKPOINT_BEST: best,
        }
        if size is not None:
            attrs[Attr.CHECKPOINT_SIZE] = size
        if metric:
            attrs[Attr.CHECKPOINT_METRIC] = str(metric)
        if value is not None:
            attrs[Attr.CHECKPOINT_METRIC_VALUE] = value
        self.count += 1
        self.last_size = size if size is not None else self.last_size
        self._counter.add(1, {Attr.CHECKPOINT_BEST: best})
        self._spans.innermost().add_event(Event.CHECKPOINT_SAVED, attrs, timestamp=ns(t))
        self._spans.emit(t, Event.CHECKPOINT_SAVED, None, attrs)


class FailureRecorder:
    """The first exception that ends training: summary, span status, event and counter."""

    def __init__(
        self,
        spans: PhaseSpans,
        counter: Counter,
        last_system: Callable[[], Mapping[str, float]],
        last_metrics: Callable[[], Mapping[str, float]],
        step: Callable[[], int | None],
        memory_at_oom: Callable[[], JsonObject | None] = lambda: None,
    ) -> None:
        self._spans, self._counter = spans, counter
        self._last_system, self._last_metrics, self._step = last_system, last_metrics, step
        self._memory_at_oom = memory_at_oom  # the CUDA snapshot's summary, when one was taken
        self.summary: JsonObject | None = None

    def record(self, item: Failure) -> None:
        if self.summary is not None:
            return  # recorded once, whichever hook saw it first
        t, exc, text = item
        system = dict(self._last_system())
        exc_type = type(exc).__name__
        message = _message(exc)
        text = encodable(text)
        verdict = classify(exc_type, message, text, system)
        memory = self._memory_at_oom() if verdict["kind"] == "cuda_oom" else None
        if memory is not None:
            verdict["memory"] = memory
            verdict["evidence"] += oom_evidence(memory)
        phase = self._spans.current or self._spans.failed_phase
        self.summary = {
            "type": exc_type,
            "message": message,
            "traceback": text,
            "time": t,
            "phase": phase,
            "step": self._step(),
            "last_metrics": dict(self._last_metrics()),
            "last_system": system,
            "verdict": verdict,
        }
        run_span = self._spans.run_span
        try:
            run_span.record_exception(exc, timestamp=ns(t))
        except Exception:  # the SDK reads str(exc), which may raise: record what we have
            attrs = {Attr.EXCEPTION_TYPE: exc_type, Attr.EXCEPTION_MESSAGE: message}
            run_span.add_event("exception", {**attrs, Attr.EXCEPTION_STACKTRACE: text}, timestamp=ns(t))
        run_span.set_status(Status(StatusCode.ERROR, f"{exc_type}: {message}"))
        self._counter.add(
            1,
            {
                Attr.ERROR_TYPE: exc_type,
                Attr.FAILURE_VERDICT: verdict["kind"] or "none",
                Attr.PHASE: phase or "none",
            },
        )
        self._spans.emit(
            t,
            Event.RUN_FAILED,
            self.summary,
            {Attr.EXCEPTION_TYPE: exc_type, Attr.EXCEPTION_MESSAGE: message, Attr.EXCEPTION_STACKTRACE: text},
            SeverityNumber.ERROR,
            "ERROR",
        )


def _message(exc: BaseException) -> str:
    try:
        return encodable(str(exc))
    except Exception:  # an exception whose __str__ raises still ends the run: name it
        return f"<{type(exc).__name__}: message could not be read>"
