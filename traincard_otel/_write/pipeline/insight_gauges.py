"""Goodput and MFU as OTel gauges, from what this process's converter saw; a gang's failed and hung
ranks (:class:`GangGauges`) as metrics an alert can fire on.

The goodput gauges describe this process's own attempt
(:class:`~traincard_otel._write.convert.tally.RunTally`, reported by rank 0, whose timeline is the
run's); the card's goodput is the whole run's, restarts included, as read from the store.
``traincard.model.flops`` and ``traincard.mfu`` are each rank's own, reported by that rank's
process. Nothing is read back from the store, and a process with nothing to say (no timed step, no
FLOPs from the adapter) reports nothing rather than a made-up zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..._analysis.efficiency import RankEfficiency
from ..._analysis.goodput import Goodput
from ..._schema import Attr, Metric
from ..._types import JsonValue


class InsightGauges:
    """Observable gauges over this process's goodput (``goodput``, None where it reports none)
    and its rank's efficiency (``efficiency``), each computed when the metric reader exports."""

    def __init__(
        self,
        meter: Meter,
        *,
        goodput: Callable[[], Goodput | None] | None,
        efficiency: Callable[[], RankEfficiency | None],
    ) -> None:
        self._goodput, self._efficiency = goodput, efficiency
        self.gang = GangGauges(meter)
        for spec, observe in (
            (Metric.GOODPUT_TIME, self._goodput_time),
            (Metric.GOODPUT_RATIO, self._goodput_ratio),
            (Metric.MODEL_FLOPS, self._model_flops),
            (Metric.MFU, self._mfu),
        ):
            meter.create_observable_gauge(
                spec.name, callbacks=[observe], unit=spec.unit, description=spec.meaning
            )

    def _goodput_time(self, _options: CallbackOptions) -> Iterable[Observation]:
        g = self._goodput() if self._goodput is not None else None
        if g is None:
            return []
        return [Observation(v, {Attr.GOODPUT_CATEGORY: k}) for k, v in g.seconds.items() if v == v]

    def _goodput_ratio(self, _options: CallbackOptions) -> Iterable[Observation]:
        g = self._goodput() if self._goodput is not None else None
        ratio = g.ratio if g is not None else None
        return [Observation(ratio)] if ratio is not None else []

    def _rank(self, pick: Callable[[RankEfficiency], float | None]) -> list[Observation]:
        e = self._efficiency()
        value = pick(e) if e is not None else None
        return (
            [Observation(value, {Attr.RANK: e.rank})]
            if e is not None and value is not None and value == value
            else []
        )

    def _model_flops(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._rank(lambda r: r.achieved_flops)

    def _mfu(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._rank(lambda r: r.mfu)


_Attrs = dict[str, str | int | bool]  # a metric point's attributes


def _rank_attributes(facts: Mapping[str, JsonValue]) -> _Attrs:
    return {
        Attr.RANK: int(facts["rank"]),
        Attr.GANG_NODE_INDEX: int(facts.get("node") or 0),
        Attr.HOST_NAME: str(facts.get("host") or ""),
    }


def _hung_attributes(facts: Mapping[str, JsonValue]) -> _Attrs:
    attrs = _rank_attributes(facts)
    if facts.get("culprit") and facts.get("where"):  # the others wait for it: say where it is stuck
        attrs[Attr.STACK_WHERE] = str(facts["where"])
    return attrs


class GangGauges:
    """A gang's failed ranks (a counter: each failed rank counted once, the first one marked) and
    hung ranks (a gauge: 1 for each rank hung now), for alert rules to fire on. Published by the
    control node's watchdog from its diagnosis of the gang's rank states, so the gang is counted
    once (:mod:`traincard_otel._write.telemetry.gang_watch`)."""

    def __init__(self, meter: Meter) -> None:
        self._failed: dict[int, _Attrs] = {}  # rank -> its attributes, kept once seen
        self._hung: list[_Attrs] = []
        m = Metric.GANG_RANK_FAILURES
        meter.create_observable_counter(
            m.name, callbacks=[self._failures], unit=m.unit, description=m.meaning
        )
        m = Metric.GANG_RANKS_HUNG
        meter.create_observable_gauge(
            m.name, callbacks=[self._hung_ranks], unit=m.unit, description=m.meaning
        )

    def publish(self, gang: Mapping[str, JsonValue]) -> None:
        """Take the latest analysis: a rank once counted stays counted; its attributes (which rank
        is first, the signal) are the newest, as evidence arrives (an agent's record comes after
        the exceptions of the ranks that a killed rank took down with it)."""
        first = gang.get("first_failure")
        if first and not first.get("hung"):  # a hung rank has not ended: it is a hung rank
            ended = [(first, True), *((c, False) for c in first.get("consequences") or [])]
            for facts, is_first in ended:
                if facts.get("hung"):  # stopped waiting for the hung one, still alive
                    continue
                attrs: _Attrs = {**_rank_attributes(facts), Attr.GANG_FIRST: is_first}
                if facts.get("signal"):
                    attrs[Attr.SIGNAL] = int(facts["signal"])
                self._failed[int(facts["rank"])] = attrs
        hung = list(gang.get("hung") or [])
        if first and first.get("hung"):
            hung = [first, *(h for h in hung if h["rank"] != first["rank"])]
        self._hung = [_hung_attributes(h) for h in hung]

    def _failures(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(1, attrs) for attrs in list(self._failed.values())]

    def _hung_ranks(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(1, attrs) for attrs in self._hung]
