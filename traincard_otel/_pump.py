"""The pump: a background thread turning the reporter's queue into OpenTelemetry signals.

Per-step rows become ``traincard.metrics`` and ``traincard.step.timing`` log events, batched column
by column (:mod:`._runs`); phases become spans with their real start and end times; checkpoints
become events (log-based, mirrored as span events). Validation and conversion of values (tensors,
numpy scalars) happen here, off the training thread.
"""

from __future__ import annotations

import collections
import math
import operator
import os
import threading
import time
from collections.abc import Callable, Mapping
from itertools import chain
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.metrics import Meter, NoOpMeter
from opentelemetry.trace import Span, Status, StatusCode

from . import _reporter as R
from ._runs import NAN, MetricRun, StepColumns
from ._safety import internal_error, warn_once
from .exporters.store import METRICS_EVENT, STEP_EVENT
from .telemetry.failure import classify

SYSTEM_EVENT = "traincard.system"
_FLOAT = {float}
_INT = {int}
_INT_OR_NONE = {int, type(None)}
_FLOAT_OR_NONE = {float, type(None)}
_ROW_KINDS = frozenset({R.METRICS, R.STEP})  # per-step rows, translated a stretch at a time
MAX_ROWS_PER_EVENT = 2000

_SEVERITY = {
    "DEBUG": SeverityNumber.DEBUG,
    "INFO": SeverityNumber.INFO,
    "WARNING": SeverityNumber.WARN,
    "ERROR": SeverityNumber.ERROR,
    "CRITICAL": SeverityNumber.FATAL,
}


def _ns(t: float) -> int:
    return int(t * 1e9)


def to_float(value: Any) -> float | None:
    """A reported value as a float, or None if it is not a number (tensors, numpy included)."""
    if type(value) is float:
        return value
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            out = item()
        except (ValueError, RuntimeError, TypeError):
            return None
        return float(out) if isinstance(out, (int, float)) else None
    return None


def as_step(value: Any) -> int | None:
    """A reported step as an int (numpy and tensor scalars included), or None if it is not one."""
    f = to_float(value)
    return int(f) if f is not None and math.isfinite(f) else None


def _dir_size(path: str) -> int | None:
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        total = 0
        for dirpath, _dirs, files in os.walk(path):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(dirpath, f))
                except OSError:
                    continue
        return total if os.path.isdir(path) else None
    except OSError:
        return None


def _metric_columns(
    items: list[tuple[Any, ...]], run: MetricRun | None, known: dict[str, float], current_step: int | None
) -> tuple[list[float], list[int | None], str | None, tuple[str, ...], list[float], dict[str, float]] | None:
    """Metric reports as columns: times, steps, phase, names, values row-major, the last report.

    None unless every report has the same names, known already (the open run's, or seen
    before), finite float values, an int step or none, the same phase and no tags.
    """
    if not items:
        return None
    _kinds, times, steps, phases, reports, tags = zip(*items, strict=True)
    first = reports[0]
    names = tuple(first)
    if (
        not names
        or tags.count(None) != len(tags)
        or phases.count(phases[0]) != len(phases)
        or set(map(len, reports)) != {len(names)}  # with the lookups below: the same names
        or not ((run is not None and run.names == names) or known.keys() >= first.keys())
        or not set(map(type, steps)) <= _INT_OR_NONE
    ):
        return None
    try:  # each report's values in the order of the first one's names
        if len(names) == 1:
            values = list(map(operator.itemgetter(names[0]), reports))
        else:
            values = list(chain.from_iterable(map(operator.itemgetter(*names), reports)))
    except KeyError:
        return None
    if set(map(type, values)) != _FLOAT or not math.isfinite(sum(values)):
        return None
    step_list: list[int | None] = list(steps)
    if None in step_list:
        step_list = [current_step if x is None else x for x in step_list]
    return list(times), step_list, phases[0], names, values, reports[-1]


def _step_columns(items: list[tuple[Any, ...]]) -> tuple[list[Any], ...] | None:
    """Step ends as columns: times, steps, durations, waits (NaN if not measured), samples,
    tokens, and the waits again with None where not measured.

    None unless every step end has an int step, a positive float duration and a float wait or none.
    """
    if not items:
        return None
    _kinds, times, steps, durations, samples, tokens, waits = zip(*items, strict=True)
    if set(map(type, steps)) != _INT or set(map(type, durations)) != _FLOAT or min(durations) <= 0:
        return None
    if not (set(map(type, samples)) | set(map(type, tokens))) <= _INT_OR_NONE:
        return None  # counts that are not ints: checked row by row
    wait_types = set(map(type, waits))
    if wait_types == _FLOAT and min(waits) >= 0:
        measured = wait_col = list(waits)
    elif wait_types <= _FLOAT_OR_NONE:
        measured = [w if w is not None and w >= 0 else None for w in waits]
        wait_col = [NAN if w is None else w for w in measured]
    else:
        return None
    counts = (
        [x or 0 for x in samples] if None in samples else list(samples),
        [x or 0 for x in tokens] if None in tokens else list(tokens),
    )
    if min(counts[0]) < 0 or min(counts[1]) < 0:
        return None
    return (list(times), list(steps), list(durations), wait_col, *counts, measured)


def place_after_step_ends(
    items: list[tuple[Any, ...]], read: list[tuple[Any, ...]], last_end: tuple[Any, float] | None
) -> list[tuple[Any, ...]]:
    """``items`` with metric reports read from sources, each placed and timed at its step's end.

    ``read`` holds (values, step, phase, time read), in report order. A report read for step N was
    made after step N ended, so it goes right after that step end in ``items`` and takes its time.
    Step ends repeat after a rewind (a resumed run), so reports are matched to them in order: each
    to the first step end of its step still to come. A report whose step has none in ``items`` is
    placed where the walk has got to: made after ``last_end`` (the previous drain's last step end,
    as (step, time); the source was read before that drain took it), or else timed as read.
    """
    try:
        placed = _at_unique_step_ends(items, read)
        return placed if placed is not None else _walk_step_ends(items, read, last_end)
    except TypeError:  # an unhashable step from step_end(), rejected with its row: timed as read
        return items + [(R.METRICS, t, step, phase, values, None) for values, step, phase, t in read]


def _at_unique_step_ends(
    items: list[tuple[Any, ...]], read: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]] | None:
    """The common case with a loop over the reports only (a call per item cost about 0.5 µs a
    step): no step ends twice in ``items`` and each report's step end is there, in report order.
    None if not."""
    step_kind = R.STEP
    at = [i for i, item in enumerate(items) if item[0] == step_kind]
    ends = {items[i][2]: i for i in at}
    if len(ends) != len(at) or not set(map(type, ends)) <= _INT:
        return None  # a rewind repeats a step (the walk matches reports in order), or not int steps
    where = [ends.get(report[1], -1) for report in read]
    if -1 in where or not all(map(operator.le, where, where[1:])):
        return None
    out: list[tuple[Any, ...]] = []
    done = 0  # items[:done] are in out
    for (values, step, phase, _read_at), i in zip(read, where, strict=True):
        if i >= done:
            out += items[done : i + 1]
            done = i + 1
        out.append((R.METRICS, items[i][1], step, phase, values, None))
    out += items[done:]
    return out


def _with_int_step(item: tuple[Any, ...]) -> tuple[Any, ...]:
    """A step end with its step as an int where it is a number (numpy, tensor, float)."""
    if item[0] != R.STEP or type(item[2]) is int:
        return item
    step = as_step(item[2])
    return item if step is None else (*item[:2], step, *item[3:])


def _walk_step_ends(
    items: list[tuple[Any, ...]], read: list[tuple[Any, ...]], last_end: tuple[Any, float] | None
) -> list[tuple[Any, ...]]:
    """:func:`place_after_step_ends` for any ``items``, a step end at a time."""
    if not {type(item[2]) for item in items if item[0] == R.STEP} <= _INT:
        items = list(map(_with_int_step, items))  # matched to reports as the pump will store them
    left = collections.Counter(item[2] for item in items if item[0] == R.STEP)
    out: list[tuple[Any, ...]] = []
    j, n = 0, len(read)

    def emit_ready(step_end: tuple[Any, ...] | None) -> None:
        nonlocal j
        while j < n:
            values, step, phase, t = read[j]
            if step_end is not None and step == step_end[2]:
                t = step_end[1]
            elif left[step] != 0:
                return  # its step end is still to come
            elif last_end is not None and step == last_end[0]:
                t = last_end[1]
            out.append((R.METRICS, t, step, phase, values, None))
            j += 1

    emit_ready(None)
    for item in items:
        out.append(item)
        if item[0] == R.STEP:
            left[item[2]] -= 1
            emit_ready(item)
    return out


class Pump:
    """Drains a :class:`~traincard_otel._reporter.Reporter` queue into OTel.

    Its thread drains when nothing else has for ``period_s``: with a store, the writer drains the
    pump before every flush, so the period is set a little above the flush interval and the
    thread only steps in if flushes stop (a stuck datastore must not stop OTLP export).
    """

    def __init__(
        self,
        reporter: R.Reporter,
        *,
        tracer: trace.Tracer,
        logger: Logger,
        meter: Meter,
        run_span: Span,
        last_system: Callable[[], Mapping[str, float]],
        period_s: float = 1.0,
    ) -> None:
        self.reporter = reporter
        self.tracer, self.logger, self.run_span = tracer, logger, run_span
        self.last_system = last_system
        self.period_s = period_s
        self._drained_at = time.monotonic()
        self.last_metrics: dict[str, float] = {}
        self.rejected: dict[str, int] = {}
        self.failure: dict[str, Any] | None = None
        self.checkpoints = 0
        self._best: tuple[str, float, bool] | None = None  # metric, value, greater_is_better
        self._phases: dict[int, Span] = {}
        self._phase_names: dict[int, str] = {}
        self._failed_phase: str | None = None  # a phase that ended with an exception
        self._max_step: int | None = None
        self._last_step_end: tuple[Any, float] | None = None  # (step, time), kept for metric sources
        self._runs: list[MetricRun] = []  # metric rows since the last flush, in report order
        self._open_run: MetricRun | None = None  # the run the next row may join
        self._run_rows = 0
        self._step_ends = 0
        self._step_cols = StepColumns()
        # (duration, wait or None, samples, tokens) of the last timed steps, for derived figures
        self._recent_steps: collections.deque[tuple[float, float | None, int, int]] = collections.deque(
            maxlen=50
        )
        self.health: Callable[[], Mapping[str, Any]] = dict
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traincard-pump", daemon=True)
        self._step_hist = meter.create_histogram(
            "traincard.step.duration", unit="s", description="Wall time per optimizer step"
        )
        self._timed = not isinstance(meter, NoOpMeter)  # a metric backend reads the histogram
        self._steps = meter.create_counter("traincard.steps", unit="{step}", description="Steps completed")
        self._ckpts = meter.create_counter("traincard.checkpoints", unit="{checkpoint}")
        self._ckpt_size: int | None = None
        meter.create_observable_gauge(
            "traincard.checkpoint.size", callbacks=[self._observe_checkpoint_size], unit="By"
        )
        self._failures = meter.create_counter("traincard.failures", unit="{failure}")
        meter.create_observable_gauge(
            "traincard.metric", callbacks=[self._observe_metrics], unit="1", description="Last reported value"
        )
        meter.create_observable_gauge("traincard.step", callbacks=[self._observe_step], unit="{step}")
        meter.create_observable_gauge("traincard.epoch", callbacks=[self._observe_epoch], unit="{epoch}")
        meter.create_observable_gauge("traincard.heartbeat", callbacks=[self._observe_heartbeat], unit="s")
        meter.create_observable_gauge(
            "traincard.stalled", callbacks=[self._observe_health("stalled")], unit="1"
        )
        meter.create_observable_gauge(
            "traincard.ranks.lost", callbacks=[self._observe_health("lost_ranks")], unit="{rank}"
        )
        meter.create_observable_gauge(
            "traincard.throughput.tokens", callbacks=[self._observe_tput("tok")], unit="{token}/s"
        )
        meter.create_observable_gauge(
            "traincard.throughput.samples", callbacks=[self._observe_tput("n")], unit="{sample}/s"
        )

    # -- observable callbacks (run on the metric reader's thread) --------------------------------
    def _observe_metrics(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [
            Observation(v, {"traincard.metric.name": k})
            for k, v in list(self.last_metrics.items())
            if math.isfinite(v)
        ]

    def _observe_checkpoint_size(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [] if self._ckpt_size is None else [Observation(self._ckpt_size)]

    def _observe_step(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [] if self.reporter.step is None else [Observation(self.reporter.step)]

    def _observe_epoch(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        epoch = self.reporter.progress_fields.get("epoch")
        return [] if epoch is None else [Observation(epoch)]

    def _observe_heartbeat(self, _options: Any) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [Observation(self.reporter.heartbeat_at)]

    def _observe_health(self, field: str) -> Callable[[Any], list[Any]]:
        def cb(_options: Any) -> list[Any]:
            from opentelemetry.metrics import Observation

            value = self.health().get(field)
            if isinstance(value, list):
                return [Observation(len(value))]
            return [Observation(1 if value else 0)]

        return cb

    def _observe_tput(self, field: str) -> Callable[[Any], list[Any]]:
        def cb(_options: Any) -> list[Any]:
            from opentelemetry.metrics import Observation

            v = self._last_throughput(field)
            return [] if v is None else [Observation(v)]

        return cb

    # -- thread ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # Each drain has a fixed cost (two log records through the SDK), so the thread drains
        # only when no one else has (the store writer does before every flush).
        while not self._stop.is_set():
            idle = time.monotonic() - self._drained_at
            if idle >= self.period_s:
                self.drain()
            else:
                self._stop.wait(self.period_s - idle)

    def drain(self) -> None:
        """Translate everything queued so far (thread-safe; also called at flush and shutdown)."""
        with self._lock:
            self._drained_at = time.monotonic()
            self.reporter.sync_clocks()
            # The sources before the queue: what they hold was reported after its step end, so
            # that step end is in this drain or an earlier one.
            read = self._read_sources() if self.reporter.metric_sources else None
            items = self.reporter.drain()
            if read is not None:
                last_end = next((item for item in reversed(items) if item[0] == R.STEP), None)
                if read:
                    items = place_after_step_ends(items, read, self._last_step_end)
                if last_end is not None:
                    self._last_step_end = (last_end[2], last_end[1])
            start, n = 0, len(items)
            while start < n:
                end = start
                while end < n and items[end][0] in _ROW_KINDS:
                    end += 1
                if end > start:
                    self._rows(items[start:end])
                    start = end
                    continue
                try:
                    self.flush_rows()  # keep rows and events in report order
                    self._handle(items[start])
                except Exception as exc:
                    internal_error("pump", exc)
                start += 1
            try:
                self.flush_rows()
            except Exception as exc:
                internal_error("pump", exc)

    def _read_sources(self) -> list[tuple[Any, ...]]:
        """(values, step, phase, time read) of the reports the reporter's metric sources hold."""
        read: list[tuple[Any, ...]] = []
        for source in self.reporter.metric_sources:
            try:
                now = time.time()
                for values, step, phase in source():
                    if not isinstance(values, dict):
                        if not isinstance(values, Mapping):
                            self._reject("bad_report", "a metric source gave %r, not a mapping", values)
                            continue
                        values = dict(values)
                    if step is not None and type(step) is not int:
                        step = as_step(step)
                    read.append((values, step, phase, now))
            except Exception as exc:
                internal_error("metric source", exc)
        return read

    def stop(self, timeout_s: float) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        self.drain()

    def _rows(self, items: list[tuple[Any, ...]]) -> None:
        """Per-step rows, a stretch of up to ``MAX_ROWS_PER_EVENT`` at a time where it can be.

        Row by row this took about 4 µs per metrics report and 2 µs per step end; a stretch with
        the same names, float values, timed steps and no rewind is checked and copied column by
        column. Anything else goes row by row, with the checks and rejections of each row.
        """
        for lo in range(0, len(items), MAX_ROWS_PER_EVENT):
            chunk = items[lo : lo + MAX_ROWS_PER_EVENT]
            try:
                if self._rows_at_once(chunk):
                    continue
            except Exception as exc:  # then row by row: each row kept or dropped on its own
                internal_error("pump", exc)
            for item in chunk:
                try:
                    if item[0] == R.METRICS:
                        self._metrics(item)
                    else:
                        self._step(item)
                except Exception as exc:
                    internal_error("pump", exc)

    def _rows_at_once(self, items: list[tuple[Any, ...]]) -> bool:
        """Add a stretch of rows column by column; False, with nothing changed, if it cannot."""
        metrics = [item for item in items if item[0] == R.METRICS]
        steps = [item for item in items if item[0] == R.STEP]
        m = _metric_columns(metrics, self._open_run, self.last_metrics, self.reporter.step)
        if metrics and m is None:
            return False
        s = _step_columns(steps)
        if steps and s is None:
            return False
        # Progress is the steps of step ends; metric steps count only until the first step end.
        progress: list[int] = s[1] if s is not None else []
        if m is not None and not self._step_ends:
            before = items.index(steps[0]) if steps else len(metrics)  # metric rows before it
            progress = [x for x in m[1][:before] if x is not None] + progress
        if progress and not (
            (self._max_step is None or progress[0] >= self._max_step)
            and all(map(operator.le, progress, progress[1:]))
        ):
            return False  # a rewind: emitted between the rows before and after it
        if (m is not None and self._run_rows + len(m[0]) > MAX_ROWS_PER_EVENT) or (
            s is not None and len(self._step_cols) + len(s[0]) > MAX_ROWS_PER_EVENT
        ):
            self.flush_rows()
        # Checked and flushed: from here on only list and dict updates, nothing that can fail.
        if progress:
            self._max_step = progress[-1]
        if m is not None:
            times, msteps, phase, names, flat, last = m
            self.last_metrics.update(last)
            run = self._open_run
            if run is None or run.names != names or run.phase != phase or run.tags is not None:
                run = self._open_run = MetricRun(phase, names, None)
                self._runs.append(run)
            run.times.extend(times)
            run.steps.extend(msteps)
            run.values.extend(flat)
            self._run_rows += len(times)
        if s is not None:
            times, steps_done, durations, wait_col, samples, tokens, waits = s
            self._step_ends += len(times)
            self._step_cols.extend(times, steps_done, durations, wait_col, samples, tokens)
            self._recent_steps.extend(
                zip(durations[-50:], waits[-50:], samples[-50:], tokens[-50:], strict=True)
            )
            if self._timed:
                for duration in durations:
                    self._step_hist.record(duration)
        return True

    # -- translation ------------------------------------------------------------------------------
    def _ctx(self) -> otel_context.Context:
        span = self._phases[max(self._phases)] if self._phases else self.run_span
        return trace.set_span_in_context(span)

    def _emit(
        self,
        t: float,
        event: str | None,
        body: Any,
        attributes: Mapping[str, Any] | None = None,
        severity: SeverityNumber = SeverityNumber.INFO,
        severity_text: str = "INFO",
    ) -> None:
        self.logger.emit(
            timestamp=_ns(t),
            context=self._ctx(),
            severity_number=severity,
            severity_text=severity_text,
            body=body,
            attributes=dict(attributes or {}),
            event_name=event,
        )

    def _handle(self, item: tuple[Any, ...]) -> None:
        """An item other than per-step rows (those are batched by :meth:`drain`)."""
        kind = item[0]
        if kind == R.LOG:
            _, t, level, line, tb = item
            attrs = {"exception.stacktrace": tb} if tb else {}
            self._emit(t, None, line, attrs, _SEVERITY.get(level, SeverityNumber.INFO), level)
        elif kind == R.PHASE_START:
            self._phase_start(*item[1:])
        elif kind == R.PHASE_END:
            self._phase_end(*item[1:])
        elif kind == R.CHECKPOINT:
            self._checkpoint(*item[1:])
        elif kind == R.SYSTEM:
            _, t, stats = item
            clean = {str(k): f for k, v in stats.items() if (f := to_float(v)) is not None}
            self._emit(t, SYSTEM_EVENT, clean)
        elif kind == R.EVENT:
            _, t, name, attrs, body = item
            self._emit(t, name, body, attrs)
        elif kind == R.FAILURE:
            self._failure(*item[1:])

    def _phase_start(self, t: float, name: str, token: int) -> None:
        span = self.tracer.start_span(
            f"training.{name}",
            context=trace.set_span_in_context(self.run_span),
            start_time=_ns(t),
            attributes={"traincard.phase": name, "traincard.step": self.reporter.step or 0},
        )
        self._phases[token], self._phase_names[token] = span, name

    def _phase_end(self, t: float, token: int, err: tuple[str, str] | None) -> None:
        span = self._phases.pop(token, None)
        name = self._phase_names.pop(token, None)
        if span is None:
            return
        if err:
            self._failed_phase = name
            span.set_status(Status(StatusCode.ERROR, f"{err[0]}: {err[1]}"))
        span.end(end_time=_ns(t))

    def _reject(self, reason: str, message: str, *args: object) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        warn_once(
            f"reject:{reason}", "traincard: " + message + " (reported once; later ones are counted)", *args
        )

    def _metrics(self, item: tuple[Any, ...]) -> None:
        # The item unpacked here, not sliced into arguments: a tuple less per row for the GC.
        _, t, step, phase, values, tags = item
        if tags is not None and not (
            isinstance(tags, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items())
        ):
            self._reject("bad_tags", "metric tags must map strings to strings; got %r, report dropped", tags)
            return
        if step is not None and type(step) is not int:
            step = as_step(step)
        floats, names = values.values(), tuple(values)
        run = self._open_run
        if (
            # known names: those of the open run (the per-step case), else any seen before
            ((run is not None and run.names == names) or self.last_metrics.keys() >= values.keys())
            and set(map(type, floats)) == _FLOAT  # every value a float (a generator is 3x slower)
            and math.isfinite(sum(floats))  # NaN or inf anywhere makes the sum non-finite
        ):
            clean = values  # the reporter's own copy
        else:
            clean = self._clean(values, step)
            names = tuple(clean)
        if not clean:
            return
        step = self.reporter.step if step is None else step
        if not self._step_ends:
            self._check_rewind(t, step)  # step ends, when reported, are the reliable progress signal
            run = self._open_run  # a rewind emits the rows before it
        self.last_metrics.update(clean)
        if run is None or run.names != names or run.phase != phase or run.tags != (tags or None):
            run = self._open_run = MetricRun(phase, names, dict(tags) if tags else None)
            self._runs.append(run)
        run.add(t, step, clean.values())
        self._run_rows += 1
        if self._run_rows >= MAX_ROWS_PER_EVENT:
            self.flush_rows()

    def _clean(self, values: dict[str, Any], step: int | None) -> dict[str, float]:
        """The valid values of a report as floats; the rest is rejected and counted."""
        clean: dict[str, float] = {}
        for name, raw in values.items():
            if not isinstance(name, str) or not name.strip():
                self._reject("bad_name", "metric names must be non-empty strings; got %r", name)
                continue
            value = to_float(raw)
            if value is None:
                self._reject(
                    f"not_a_number:{name}",
                    "metric %r is not a number (%s); value dropped",
                    name,
                    type(raw).__name__,
                )
                continue
            if not math.isfinite(value):
                warn_once(
                    f"nonfinite:{name}", "traincard: metric %r is %s at step %s (recorded)", name, value, step
                )
            clean[name] = value
        return clean

    def _check_rewind(self, t: float, step: int | None) -> None:
        """A step counter moving backwards is a resume from a checkpoint, not corrupt data."""
        if step is None:
            return
        if self._max_step is not None and step < self._max_step:
            self.flush_rows()  # rows before the rewind go out first
            self._emit(
                t,
                "traincard.run.rewind",
                None,
                {"traincard.step": step, "traincard.rewind.from": self._max_step},
            )
        self._max_step = step

    def _step(self, item: tuple[Any, ...]) -> None:
        _, t, step, duration, samples, tokens, wait = item
        if type(step) is not int:
            step = as_step(step)  # numpy and tensor scalars, floats
            if step is None:
                self._reject("bad_step", "step_end(step=%r) is not a step number; step end dropped", item[2])
                return
        self._step_ends += 1
        self._check_rewind(t, step)
        if type(duration) is not float and duration is not None:
            duration = self._measure(duration, "duration_s")
        if type(wait) is not float and wait is not None:
            wait = self._measure(wait, "data_wait_s")
        wait = wait if wait is not None and wait >= 0 else None
        wait_s = NAN if wait is None else wait
        if duration is not None and duration > 0:
            n = samples if type(samples) is int and samples >= 0 else self._count(samples, "samples")
            tok = tokens if type(tokens) is int and tokens >= 0 else self._count(tokens, "tokens")
            self._step_cols.add(t, step, duration, wait_s, n, tok)
            self._recent_steps.append((duration, wait, n, tok))
            if self._timed:
                self._step_hist.record(duration)
        else:
            self._step_cols.add(t, step, NAN, wait_s, 0, 0)
        if len(self._step_cols.steps) >= MAX_ROWS_PER_EVENT:
            self.flush_rows()

    def _measure(self, value: Any, field: str) -> float | None:
        """A step end's time in seconds as a float; None (not measured) if it is not a number."""
        f = to_float(value)
        if f is None:
            self._reject(
                f"bad_{field}", "step_end(%s=%r) is not a number of seconds; not measured", field, value
            )
        return f

    def _count(self, value: Any, field: str) -> int:
        """A step end's sample or token count as an int; 0 (not counted) if it is not a count."""
        if value is None:
            return 0
        f = to_float(value)
        if f is None or not math.isfinite(f) or f < 0:
            self._reject(f"bad_{field}", "step_end(%s=%r) is not a count; not counted", field, value)
            return 0
        return int(f)

    # Derived from the recent step rows when asked (by the watchdog, the metric reader), not per step.
    def recent_durations(self) -> list[float]:
        return [d for d, _w, _n, _tok in list(self._recent_steps)]

    def recent_wait_shares(self) -> list[float]:
        """The share of each recent step spent waiting for data."""
        return [min(w / d, 1.0) for d, w, _n, _tok in list(self._recent_steps) if w is not None]

    def _last_throughput(self, field: str) -> float | None:
        try:
            d, _w, n, tok = self._recent_steps[-1]
        except IndexError:
            return None
        count = tok if field == "tok" else n
        return count / d if count else None

    def flush_rows(self) -> None:
        """Emit the batched per-step rows: one log event per kind and drain, not one per step.

        A row-per-record stream costs ~10 µs of SDK work per step on this thread, which competes
        with training for the GIL; batching makes it a few µs per hundred steps.
        """
        if self._runs:
            runs, rows = self._runs, self._run_rows
            self._runs, self._open_run, self._run_rows = [], None, 0
            last = runs[-1]
            self._emit(
                last.times[-1],
                METRICS_EVENT,
                {"runs": [run.body() for run in runs]},
                {
                    "traincard.step": last.steps[-1] if last.steps[-1] is not None else -1,
                    "traincard.rows": rows,
                },
            )
        if self._step_cols:
            cols, self._step_cols = self._step_cols, StepColumns()
            self._steps.add(len(cols))
            self._emit(
                cols.times[-1],
                STEP_EVENT,
                cols.body(),
                {"traincard.step": cols.steps[-1], "traincard.rows": len(cols)},
            )

    def _checkpoint(self, t: float, path: str, step: int | None, meta: dict[str, Any]) -> None:
        size = _dir_size(path)
        metric, value = meta.get("metric"), to_float(meta.get("value"))
        best = meta.get("best")
        if best is None and metric and value is not None:
            greater = bool(meta.get("greater_is_better", False))
            if self._best is None or self._best[0] != metric:
                best = True
            else:
                best = value > self._best[1] if greater else value < self._best[1]
            if best:
                self._best = (str(metric), value, greater)
        attrs: dict[str, Any] = {
            "traincard.checkpoint.path": path,
            "traincard.step": step if step is not None else -1,
            "traincard.checkpoint.best": bool(best),
        }
        if size is not None:
            attrs["traincard.checkpoint.size"] = size
        if metric:
            attrs["traincard.checkpoint.metric"] = str(metric)
        if value is not None:
            attrs["traincard.checkpoint.metric_value"] = value
        self.checkpoints += 1
        self._ckpt_size = size if size is not None else self._ckpt_size
        self._ckpts.add(1, {"traincard.checkpoint.best": bool(best)})
        span = self._phases[max(self._phases)] if self._phases else self.run_span
        span.add_event("traincard.checkpoint.saved", attrs, timestamp=_ns(t))
        self._emit(t, "traincard.checkpoint.saved", None, attrs)

    def _failure(self, t: float, exc: BaseException, text: str) -> None:
        if self.failure is not None:
            return  # recorded once, whichever hook saw it first
        system = dict(self.last_system())
        exc_type = type(exc).__name__
        verdict = classify(exc_type, str(exc), text, system)
        phase = self._phase_names[max(self._phase_names)] if self._phase_names else self._failed_phase
        self.failure = {
            "type": exc_type,
            "message": str(exc),
            "traceback": text,
            "time": t,
            "phase": phase,
            "step": self.reporter.step,
            "last_metrics": dict(self.last_metrics),
            "last_system": system,
            "verdict": verdict,
        }
        self.run_span.record_exception(exc, timestamp=_ns(t))
        self.run_span.set_status(Status(StatusCode.ERROR, f"{exc_type}: {exc}"))
        self._failures.add(
            1,
            {
                "error.type": exc_type,
                "traincard.failure.verdict": verdict["kind"] or "none",
                "traincard.phase": phase or "none",
            },
        )
        self._emit(
            t,
            "traincard.run.failed",
            self.failure,
            {"exception.type": exc_type, "exception.message": str(exc), "exception.stacktrace": text},
            SeverityNumber.ERROR,
            "ERROR",
        )

    def close_open_phases(self, t: float) -> None:
        with self._lock:
            for token in sorted(self._phases, reverse=True):
                self._phases.pop(token).end(end_time=_ns(t))
            self._phase_names.clear()

    def status_fields(self) -> dict[str, Any]:
        return {
            "last_metrics": dict(self.last_metrics),
            "rejected": dict(self.rejected),
            "failure": self.failure,
            "checkpoints": self.checkpoints,
            "phase": self._phase_names[max(self._phase_names)] if self._phase_names else None,
        }
