"""The converter's metric instruments: created once, read by the metric reader when it collects.

Only the step-duration histogram, the checkpoint and failure counters are recorded as things
happen; everything else is an observable read from the converter's state at collection time,
so a training step costs no instrument call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Meter, Observation

from ..._schema import ANATOMY_PARTS, STEP_PARTS, Attr, Metric, MetricSpec
from ..queue import ReportQueue

Observe = Callable[[CallbackOptions], Iterable[Observation]]


def _gauge(meter: Meter, spec: MetricSpec, callback: Observe) -> None:
    meter.create_observable_gauge(spec.name, callbacks=[callback], unit=spec.unit, description=spec.meaning)


def _one(value: float | None) -> list[Observation]:
    return [] if value is None else [Observation(value)]


class ConverterInstruments:
    """Instruments of the training figures; ``view`` callables read the converter's state."""

    def __init__(
        self,
        meter: Meter,
        queue: ReportQueue,
        *,
        last_metrics: Callable[[], Mapping[str, float]],
        step_ends: Callable[[], int],
        rejected: Callable[[], Mapping[str, int]],
        checkpoint_size: Callable[[], int | None],
        throughput: Callable[[str], float | None],
    ) -> None:
        m = Metric.STEP_DURATION
        self.step_duration: Histogram = meter.create_histogram(m.name, unit=m.unit, description=m.meaning)
        m = Metric.STEP_PART_DURATION
        self.part_duration: Histogram = meter.create_histogram(m.name, unit=m.unit, description=m.meaning)
        self._part_attrs = [{Attr.STEP_PART: part} for part in ANATOMY_PARTS]
        m = Metric.CHECKPOINTS
        self.checkpoints: Counter = meter.create_counter(m.name, unit=m.unit, description=m.meaning)
        m = Metric.FAILURES
        self.failures: Counter = meter.create_counter(m.name, unit=m.unit, description=m.meaning)
        m = Metric.STEPS
        meter.create_observable_counter(
            m.name, callbacks=[lambda _o: [Observation(step_ends())]], unit=m.unit, description=m.meaning
        )
        m = Metric.REJECTED
        meter.create_observable_counter(
            m.name,
            callbacks=[
                lambda _o: [
                    Observation(n, {Attr.DROP_REASON: reason}) for reason, n in dict(rejected()).items()
                ]
            ],
            unit=m.unit,
            description=m.meaning,
        )
        _gauge(
            meter,
            Metric.METRIC,
            lambda _o: [
                Observation(v, {Attr.METRIC_NAME: k})
                for k, v in list(last_metrics().items())
                if math.isfinite(v)
            ],
        )
        _gauge(meter, Metric.CHECKPOINT_SIZE, lambda _o: _one(checkpoint_size()))
        _gauge(meter, Metric.STEP, lambda _o: _one(queue.step if type(queue.step) is int else None))
        _gauge(meter, Metric.EPOCH, lambda _o: _one(_number(queue.progress.get("epoch"))))
        _gauge(meter, Metric.HEARTBEAT, lambda _o: [Observation(queue.heartbeat_at)])
        _gauge(meter, Metric.THROUGHPUT_TOKENS, lambda _o: _one(throughput("tok")))
        _gauge(meter, Metric.THROUGHPUT_SAMPLES, lambda _o: _one(throughput("n")))

    def record_parts(self, durations: Sequence[float], parts: Sequence[float]) -> None:
        """Each step's measured parts and the rest (``other``) on the part histogram."""
        record, attrs, width = self.part_duration.record, self._part_attrs, len(STEP_PARTS)
        for i, duration in enumerate(durations):
            row = parts[i * width : i * width + width]
            known = 0.0
            for value, attr in zip(row, attrs, strict=False):
                if value == value:  # NaN: not measured
                    record(value, attr)
                    known += value
            if duration == duration and known:
                record(max(duration - known, 0.0), attrs[-1])


def health_instruments(meter: Meter, health: Callable[[], Mapping[str, object]]) -> None:
    """The watchdog's figures (stalled, lost ranks) as gauges; ``health`` returns its status fields."""

    def flag(field: str) -> Observe:
        def cb(_options: CallbackOptions) -> list[Observation]:
            value = health().get(field)
            return [Observation(len(value) if isinstance(value, list) else (1 if value else 0))]

        return cb

    _gauge(meter, Metric.STALLED, flag("stalled"))
    _gauge(meter, Metric.RANKS_LOST, flag("lost_ranks"))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
