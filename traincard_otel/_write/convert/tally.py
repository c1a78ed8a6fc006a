"""What this process's converter saw, summed as it goes: its attempt's goodput, its rank's MFU,
and the summary its store writer keeps.

:class:`RunTally` is handed the row batcher's typed rows right after they were emitted (as the
anomaly rules are), and the converter's phases, stalls and hyperparameters in report order; the
sums themselves are pure (:mod:`traincard_otel._analysis.goodput_tally`,
:class:`~traincard_otel._analysis.efficiency.ThroughputWindow`,
:mod:`traincard_otel._analysis.summary_stream`). The metric reader's thread and the flush schedule
read it while the converter feeds it, so one lock guards both sides (a few times per drain, never
on the training thread). A bug here never costs the rows: it is reported and the rows go on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.util.types import AnyValue

from ..._analysis.efficiency import RankEfficiency, ThroughputWindow
from ..._analysis.goodput import Goodput
from ..._analysis.goodput_tally import GoodputTally
from ..._analysis.summary import TaskSummarySection
from ..._analysis.summary_stream import SummaryTally
from ..._safety import internal_error
from ..._schema import Attr, Event
from ..._types import JsonValue
from .columns import MetricRun, StepColumns


def _seconds(value: AnyValue) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


class RunTally:
    """The converter's running sums for this process (see the module docstring)."""

    def __init__(self, started_at: float, *, rank: int, attempt: int) -> None:
        self.rank = rank
        self.running = (
            True  # until the pipeline ends the run (the time since the last step is not shutdown yet)
        )
        self._lock = threading.Lock()
        self._goodput = GoodputTally(started_at, rank=rank, first_attempt=attempt == 0)
        self._throughput = ThroughputWindow()
        self._summary = SummaryTally()

    def _feed(self, what: str, fn: Callable[[], None]) -> None:
        try:
            with self._lock:
                fn()
        except Exception as exc:
            internal_error(f"run tally ({what})", exc)

    # -- the rows (a RowWatch) ------------------------------------------------------------------
    def metric_runs(self, runs: Sequence[MetricRun]) -> None:
        def add() -> None:
            for run in runs:
                if not run.tags:  # a summary compares the untagged metrics
                    self._summary.add_run(run.names, run.steps, run.values)

        self._feed("metrics", add)

    def step_columns(self, cols: StepColumns) -> None:
        def add() -> None:
            self._goodput.add_steps(cols.steps, cols.times, cols.durations, cols.waits)
            self._throughput.add(cols.durations, cols.samples, cols.tokens)

        self._feed("step ends", add)

    def rewound(self) -> None:
        """A rewind needs nothing here: the goodput tally finds re-computed steps by their number."""

    # -- the rest, in report order --------------------------------------------------------------
    def phase_started(self, t: float, name: str, token: int) -> None:
        self._feed("phases", lambda: self._goodput.phase_started(t, name, token))

    def phase_ended(self, t: float, token: int) -> None:
        self._feed("phases", lambda: self._goodput.phase_ended(t, token))

    def phases_closed(self, t: float) -> None:
        self._feed("phases", lambda: self._goodput.phases_closed(t))

    def event(self, t: float, name: str, attributes: Mapping[str, AnyValue]) -> None:
        """A lifecycle event: the watchdog's stalls count."""
        if name == Event.STALL_STARTED:
            idle = _seconds(attributes.get(Attr.STALL_IDLE_S))
            self._feed("stalls", lambda: self._goodput.stall_started(t, idle))
        elif name == Event.STALL_CLEARED:
            lasted = _seconds(attributes.get(Attr.STALL_DURATION_S))
            self._feed("stalls", lambda: self._goodput.stall_cleared(t, lasted))

    def hyperparameters(self, values: object) -> None:
        """A ``traincard.hyperparams`` event's body, as the converter emitted it."""
        if isinstance(values, dict):
            self._feed("hyperparameters", lambda: self._summary.add_hyperparameters(values))

    # -- read by the gauges and the summary ------------------------------------------------------
    def goodput(self, now: float, *, running: bool) -> Goodput | None:
        """This attempt's goodput at ``now`` (None before its first timed step)."""
        with self._lock:
            return self._goodput.goodput(now, running=running)

    def efficiency(self, progress: Mapping[str, JsonValue]) -> RankEfficiency | None:
        """This rank's model FLOP/s and MFU over its recent steps (None without the adapter's FLOPs)."""
        with self._lock:
            return self._throughput.figures(self.rank, progress)

    def summary(self) -> TaskSummarySection:
        """The metrics and hyperparameters part of this writer's summary."""
        with self._lock:
            return self._summary.summary()
