"""Per-step rows (metric reports and step ends) batched into runs and step columns.

A stretch of rows is taken column by column when every row is the common case (the same known
names, finite floats, timed steps, no rewind); anything else goes row by row, with its checks and
rejections. Either way the rows leave as two log events per drain (``traincard.metrics`` and
``traincard.step.timing``), not one per step: a record per step cost ~10 µs of SDK work on a
thread that competes with training for the GIL.
"""

from __future__ import annotations

import collections
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from opentelemetry.util.types import AnyValue

from ..._analysis.anatomy import window_anatomy
from ..._gil import Slices
from ..._schema import Attr, Event, MetricsReport, StepEnd
from ..._text import encodable
from ..._types import JsonObject
from .columns import NAN, WIDTH, MetricRun, StepColumns, metric_columns, read_parts, step_columns
from .values import Rejections, as_step, to_float

MAX_ROWS_PER_EVENT = 2000
#: Metric rows from several threads (a data loader's and the training loop's) arrive a few steps
#: out of order; only a larger backward jump of metric steps is a rewind. Step ends come from the
#: training loop alone, so any backward step end is one.
METRIC_JITTER_STEPS = 32
_FLOAT = {float}

Emit = Callable[[float, str, AnyValue, Mapping[str, AnyValue]], None]  # (time, event, body, attributes)


class RowWatch(Protocol):
    """Is handed the typed rows right after they were emitted (the anomaly rules, the run's tally)."""

    def metric_runs(self, runs: Sequence[MetricRun]) -> None: ...

    def step_columns(self, cols: StepColumns) -> None: ...

    def rewound(self) -> None: ...


class RowBatcher:
    """Holds the rows since the last emit; tracks the last values, recent steps and rewinds."""

    def __init__(
        self,
        emit: Emit,
        rejections: Rejections,
        on_steps: Callable[[list[float], Sequence[float] | None], None],
        watches: Sequence[RowWatch] = (),
    ) -> None:
        self._emit, self._rejections, self._on_steps = emit, rejections, on_steps
        self._watches = tuple(watches)  # handed the typed rows right after they are emitted
        self.last_metrics: dict[str, float] = {}
        self.max_step: int | None = None
        self.step_ends = 0
        self.steps_emitted = 0
        # (duration, wait or None, samples, tokens) of the last timed steps, for derived figures
        self.recent_steps: collections.deque[tuple[float, float | None, int, int]] = collections.deque(
            maxlen=50
        )
        # (duration, parts) of the last steps that carried their anatomy, for the rank's state
        self.recent_parts: collections.deque[tuple[float, Sequence[float]]] = collections.deque(maxlen=50)
        self._runs: list[MetricRun] = []  # metric rows since the last emit, in report order
        self._open_run: MetricRun | None = None  # the run the next row may join
        self._run_rows = 0
        self._step_cols = StepColumns()

    # -- a stretch at a time -------------------------------------------------------------------
    def add(self, items: Sequence[MetricsReport | StepEnd], on_error: Callable[[Exception], None]) -> None:
        """Add a stretch of rows, up to ``MAX_ROWS_PER_EVENT`` at a time column by column where it
        can be, else row by row (each row kept or dropped on its own)."""
        slices = Slices()
        for lo in range(0, len(items), MAX_ROWS_PER_EVENT):
            slices.check()
            chunk = items[lo : lo + MAX_ROWS_PER_EVENT]
            try:
                if self._add_columns(chunk):
                    continue
            except Exception as exc:
                on_error(exc)
            for item in chunk:
                try:
                    if isinstance(item, MetricsReport):
                        self.add_metrics(item)
                    else:
                        self.add_step(item)
                except Exception as exc:
                    on_error(exc)

    def _add_columns(self, items: Sequence[MetricsReport | StepEnd]) -> bool:
        """Add a stretch column by column; False, with nothing changed, if it cannot."""
        metrics = [item for item in items if type(item) is MetricsReport]
        steps = [item for item in items if type(item) is StepEnd]
        m = metric_columns(metrics, self._open_run, self.last_metrics)
        if metrics and m is None:
            return False
        s = step_columns(steps)
        if steps and s is None:
            return False
        # Progress is the steps of step ends; metric steps count only until the first step end.
        progress: list[int] = s.steps if s is not None else []
        if m is not None and not self.step_ends:
            before = list(items).index(steps[0]) if steps else len(metrics)  # metric rows before it
            progress = [x for x in m.steps[:before] if x is not None] + progress
        if progress and not (
            (self.max_step is None or progress[0] >= self.max_step)
            and all(map(operator.le, progress, progress[1:]))
        ):
            return False  # a rewind, or jitter: row by row
        if (m is not None and self._run_rows + len(m.times) > MAX_ROWS_PER_EVENT) or (
            s is not None and len(self._step_cols) + len(s.times) > MAX_ROWS_PER_EVENT
        ):
            self.flush()
        # Checked and flushed: from here on only list and dict updates, nothing that can fail.
        if progress:
            self.max_step = progress[-1]
        if m is not None:
            self.last_metrics.update(m.last)
            run = self._open_run
            if run is None or run.names != m.names or run.phase != m.phase or run.tags is not None:
                run = self._open_run = MetricRun(m.phase, m.names, None)
                self._runs.append(run)
            run.times.extend(m.times)
            run.steps.extend(m.steps)
            run.values.extend(m.values)
            self._run_rows += len(m.times)
        if s is not None:
            self.step_ends += len(s.times)
            self._step_cols.extend(s.times, s.steps, s.durations, s.wait_col, s.samples, s.tokens, s.parts)
            self.recent_steps.extend(
                zip(s.durations[-50:], s.waits[-50:], s.samples[-50:], s.tokens[-50:], strict=True)
            )
            if s.parts is not None:
                rows = range(max(0, len(s.durations) - 50), len(s.durations))
                self.recent_parts.extend(
                    (s.durations[i], s.parts[i * WIDTH : i * WIDTH + WIDTH]) for i in rows
                )
            self._on_steps(s.durations, s.parts)
        return True

    # -- a row at a time ---------------------------------------------------------------------
    def add_metrics(self, item: MetricsReport) -> None:
        t, step, phase, values, tags = item
        if tags is not None:
            if not (
                isinstance(tags, Mapping)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items())
            ):
                self._rejections.reject(
                    "bad_tags", "metric tags must map strings to strings; got %r, report dropped", tags
                )
                return
            tags = {encodable(k): encodable(v) for k, v in tags.items()}
        if phase is not None:
            phase = encodable(str(phase))
        if step is not None and type(step) is not int:
            step = as_step(step)
        floats, names = values.values(), tuple(values)
        run = self._open_run
        clean: Mapping[str, float]
        if (
            # known names: those of the open run (the per-step case), else any seen before
            ((run is not None and run.names == names) or self.last_metrics.keys() >= values.keys())
            and set(map(type, floats)) == _FLOAT  # every value a float (a generator is 3x slower)
            and math.isfinite(sum(floats))  # NaN or inf anywhere makes the sum non-finite
        ):
            clean = values  # the reporter's own copy
        else:
            clean = self._rejections.clean(values, step, self.last_metrics)
            names = tuple(clean)
        if not clean:
            return
        if not self.step_ends:
            self._check_rewind(t, step, METRIC_JITTER_STEPS)  # step ends, when reported, are the progress
            run = self._open_run  # a rewind emits the rows before it
        self.last_metrics.update(clean)
        if run is None or run.names != names or run.phase != phase or run.tags != (tags or None):
            run = self._open_run = MetricRun(phase, names, dict(tags) if tags else None)
            self._runs.append(run)
        run.add(t, step, clean.values())
        self._run_rows += 1
        if self._run_rows >= MAX_ROWS_PER_EVENT:
            self.flush()

    def add_step(self, item: StepEnd) -> None:
        t, step, duration, samples, tokens, wait, parts = item
        if type(step) is not int:
            step = as_step(step)  # numpy and tensor scalars, floats
            if step is None:
                self._rejections.reject(
                    "bad_step", "step_end(step=%r) is not a step number; step end dropped", item.step
                )
                return
        self.step_ends += 1
        self._check_rewind(t, step, 0)
        r = self._rejections
        if type(duration) is not float and duration is not None:
            duration = r.measure(duration, "duration_s")
        if type(wait) is not float and wait is not None:
            wait = r.measure(wait, "data_wait_s")
        wait = wait if wait is not None and wait >= 0 else None
        wait_s = NAN if wait is None else wait
        if parts is not None:
            parts = self._parts(parts)
        if duration is not None and duration > 0:
            n = samples if type(samples) is int and samples >= 0 else r.count(samples, "samples")
            tok = tokens if type(tokens) is int and tokens >= 0 else r.count(tokens, "tokens")
            self._step_cols.add(t, step, duration, wait_s, n, tok, parts)
            self.recent_steps.append((duration, wait, n, tok))
            if parts is not None:
                self.recent_parts.append((duration, parts))
            self._on_steps([duration], parts)
        else:
            self._step_cols.add(t, step, NAN, wait_s, 0, 0, parts)
        if len(self._step_cols.steps) >= MAX_ROWS_PER_EVENT:
            self.flush()

    def _parts(self, parts: object) -> tuple[float, ...] | None:
        """A step end's anatomy as ``WIDTH`` seconds (NaN where not measured, or negative); one
        that is not is rejected and counted, and the step kept without it."""
        read = read_parts(parts)
        if isinstance(read, tuple) and len(read) == WIDTH:
            seconds = tuple(to_float(v) for v in read)
            if all(v is not None for v in seconds):
                return tuple(v if v is not None and v >= 0 else NAN for v in seconds)
        self._rejections.reject(
            "bad_parts", "a step end's parts are not %d seconds: %r; dropped", WIDTH, parts
        )
        return None

    def _check_rewind(self, t: float, step: int | None, jitter: int) -> None:
        """A step counter moving backwards is a resume from a checkpoint, not corrupt data."""
        if step is None:
            return
        if self.max_step is not None and step < self.max_step:
            if self.max_step - step <= jitter:
                return  # threads a few steps out of order
            self.flush()  # rows before the rewind go out first
            self._emit(t, Event.RUN_REWIND, None, {Attr.STEP: step, Attr.REWIND_FROM: self.max_step})
            for watch in self._watches:
                watch.rewound()
        self.max_step = step

    # -- out -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """Emit the batched rows: one log event per kind, not one per step."""
        if self._runs:
            runs, rows = self._runs, self._run_rows
            self._runs, self._open_run, self._run_rows = [], None, 0
            last = runs[-1]
            self._emit(
                last.times[-1],
                Event.METRICS,
                {"runs": [run.body() for run in runs]},
                {Attr.STEP: last.steps[-1] if last.steps[-1] is not None else -1, Attr.ROWS: rows},
            )
            for watch in self._watches:
                watch.metric_runs(runs)
        if self._step_cols:
            cols, self._step_cols = self._step_cols, StepColumns()
            self.steps_emitted += len(cols)
            self._emit(
                cols.times[-1],
                Event.STEP_TIMING,
                cols.body(),
                {Attr.STEP: cols.steps[-1], Attr.ROWS: len(cols)},
            )
            for watch in self._watches:
                watch.step_columns(cols)

    # -- derived figures, when asked (by the watchdog, the metric reader), not per step ---------
    def recent_durations(self) -> list[float]:
        return [d for d, _w, _n, _tok in list(self.recent_steps)]

    def recent_anatomy(self) -> JsonObject | None:
        """The recent steps' anatomy (median seconds per part, the step, the step without the wait
        in communication), for the rank's state: what rank 0 compares ranks by (``profile_on``)."""
        recent = [
            (d, p) for d, p in self.recent_parts if any(v == v for v in p)
        ]  # (a step without one: all NaN)
        if not recent:
            return None
        durations, parts = zip(*recent, strict=True)
        found = window_anatomy(0, durations, list(zip(*parts, strict=True)))  # (the state keeps no rank)
        if found is None:
            return None
        return {"steps": found.steps, "step_s": found.step_s, "own_s": found.own_s, "seconds": found.seconds}

    def recent_wait_shares(self) -> list[float]:
        """The share of each recent step spent waiting for data."""
        return [min(w / d, 1.0) for d, w, _n, _tok in list(self.recent_steps) if w is not None]

    def last_throughput(self, field: str) -> float | None:
        try:
            d, _w, n, tok = self.recent_steps[-1]
        except IndexError:
            return None
        count = tok if field == "tok" else n
        return count / d if count else None
