"""The anomaly rules applied to the rows the converter emits (:mod:`traincard_otel._analysis.anomalies`).

:class:`AnomalyWatch` is handed the row batcher's typed rows (:class:`~.columns.MetricRun`,
:class:`~.columns.StepColumns`) right after it emitted them as events, so the detector sees
exactly the rows the batcher accepted, in report order, a column at a time and off the training
thread, without reading back what was encoded. Each anomaly becomes a ``traincard.anomaly`` event
right after the rows that revealed it, and one more on the ``traincard.anomalies`` counter (what
the ``TrainingAnomaly`` alert rule reads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from opentelemetry.metrics import Meter
from opentelemetry.util.types import AnyValue

from ..._analysis.anomalies import Anomaly, AnomalyDetector, AnomalyRules
from ..._safety import internal_error
from ..._schema import ANOMALY_KIND_NAMES, Attr, Event, Metric
from ..._schema.keys import series_key
from ...exceptions import ConfigError
from .columns import MetricRun, StepColumns

Emit = Callable[[float, str, AnyValue, Mapping[str, AnyValue]], None]


def parse_rules(text: str) -> AnomalyRules | None:
    """The rules the ``anomalies`` setting (``TRAINCARD_ANOMALIES``) asks for (None: detection off).

    Raises:
        ConfigError: the text names an unknown rule or a value out of range.
    """
    try:
        return AnomalyRules.parse(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class AnomalyWatch:
    """Judges the converter's rows as they go out; records what it finds through ``emit``."""

    def __init__(self, emit: Emit, meter: Meter, rules: AnomalyRules | None) -> None:
        """``rules`` None: judge nothing (``TRAINCARD_ANOMALIES=off``)."""
        self._emit = emit
        self.detector = AnomalyDetector(rules) if rules is not None else None
        m = Metric.ANOMALIES
        self._counter = meter.create_counter(m.name, unit=m.unit, description=m.meaning)
        if self.detector is not None:
            # Every kind's series exists from the start at 0: Prometheus' increase() sees no rise
            # in a counter whose first sample is already 1, so the alert rule would miss the first.
            for kind in ANOMALY_KIND_NAMES:
                self._counter.add(0, {Attr.ANOMALY_KIND: kind})

    def metric_runs(self, runs: Sequence[MetricRun]) -> None:
        """Judge metric rows (values row-major, one row per step) just emitted."""
        detector = self.detector
        if detector is None:
            return
        try:
            for run in runs:
                names, phase = run.names, run.phase
                watched = [(j, name) for j, name in enumerate(names) if detector.role(name, phase) != "none"]
                if not watched:
                    continue
                k, steps, times, values = len(names), run.steps, run.times, run.values
                for j, name in watched:
                    key = series_key(name, run.tags)
                    for i, value in enumerate(values[j::k]):
                        found = detector.observe(steps[i], key, value, phase)
                        if found:
                            self._record(times[i], found)
        except Exception as exc:  # a bug in a rule never costs the rows
            internal_error("anomaly detection", exc)

    def step_columns(self, cols: StepColumns) -> None:
        """Judge step ends just emitted."""
        detector = self.detector
        if detector is None:
            return
        try:
            found = detector.observe_steps(cols.steps, cols.durations, cols.tokens, cols.samples)
            for i, anomaly in found:
                self._record(cols.times[i], [anomaly])
        except Exception as exc:
            internal_error("anomaly detection", exc)

    def rewound(self) -> None:
        """The run went back to an earlier step (a resume): the detector forgets what came after."""
        if self.detector is not None:
            self.detector.rewound()

    def _record(self, t: float, found: list[Anomaly]) -> None:
        for a in found:
            attributes: dict[str, AnyValue] = {
                Attr.ANOMALY_KIND: a.kind,
                Attr.METRIC_NAME: a.name,
                Attr.STEP: a.step if a.step is not None else -1,
                Attr.ANOMALY_VALUE: a.value,
            }
            if a.expected is not None:
                attributes[Attr.ANOMALY_EXPECTED] = a.expected
            self._emit(t, Event.ANOMALY, a.message, attributes)
            self._counter.add(1, {Attr.ANOMALY_KIND: a.kind})
