"""Goodput and MFU as OTel gauges, the same figures the live card shows; a gang's failed and hung
ranks (:class:`GangGauges`) as metrics an alert can fire on.

These are read-time insights (``traincard_otel._insights``): they need the whole run, restarts
included, so they are computed from the store, not from the converter's stream. The process that
draws the live card (a Metaflow step's card refresher) reads the store every few seconds anyway;
it :meth:`~InsightGauges.publish`\\ es the card's ``insights`` section here and the gauges report
the latest one at each metric export. A process with no live card publishes nothing, and the
gauges stay silent rather than report a made-up zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from .._schema import Attr, Metric
from .._types import JsonValue


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


class InsightGauges:
    """Observable gauges over the last published ``insights`` section of the card payload."""

    def __init__(self, meter: Meter) -> None:
        self._latest: Mapping[str, JsonValue] = {}
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

    def publish(self, insights: Mapping[str, JsonValue]) -> None:
        """Keep ``insights`` (the payload's section) for the next export; one reference swap."""
        self._latest = insights

    def publish_gang(self, gang: Mapping[str, JsonValue]) -> None:
        """Keep the gang's first failure and hung ranks (the payload's ``gang`` section)."""
        self.gang.publish(gang)

    def _goodput(self) -> Mapping[str, JsonValue]:
        return self._latest.get("goodput") or {}

    def _goodput_time(self, _options: CallbackOptions) -> Iterable[Observation]:
        seconds = self._goodput().get("seconds") or {}
        return [
            Observation(v, {Attr.GOODPUT_CATEGORY: str(k)})
            for k, raw in seconds.items()
            if (v := _number(raw)) is not None
        ]

    def _goodput_ratio(self, _options: CallbackOptions) -> Iterable[Observation]:
        ratio = _number(self._goodput().get("ratio"))
        return [Observation(ratio)] if ratio is not None else []

    def _per_rank(self, key: str) -> list[Observation]:
        ranks = (self._latest.get("efficiency") or {}).get("ranks") or []
        return [
            Observation(v, {Attr.RANK: int(r["rank"])})
            for r in ranks
            if (v := _number(r.get(key))) is not None
        ]

    def _model_flops(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._per_rank("achieved_flops")

    def _mfu(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._per_rank("mfu")


_Attrs = dict[str, str | int | bool]  # a metric point's attributes


def _rank_attributes(facts: Mapping[str, JsonValue]) -> _Attrs:
    return {
        Attr.RANK: int(facts["rank"]),
        Attr.GANG_NODE_INDEX: int(facts.get("node") or 0),
        Attr.HOST_NAME: str(facts.get("host") or ""),
    }


class GangGauges:
    """A gang's failed ranks (a counter: each failed rank counted once, the first one marked) and
    hung ranks (a gauge: 1 for each rank hung now), for alert rules to fire on. Published by the
    control node's refresher from the card's gang section, so the gang is counted once."""

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
        self._hung = [_rank_attributes(h) for h in hung]

    def _failures(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(1, attrs) for attrs in list(self._failed.values())]

    def _hung_ranks(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(1, attrs) for attrs in self._hung]
