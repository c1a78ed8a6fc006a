"""Goodput and MFU as OTel gauges, the same figures the card shows; a gang's failed and hung
ranks (:class:`GangGauges`) as metrics an alert can fire on.

These are read-time insights (:func:`traincard_otel._analysis.analysis.analyse`): they need the
whole run, restarts included, so they are computed from what the store holds, not from the
converter's stream. A process that draws the live card publishes the analysis the card draws;
every other process with a store analyses its own store when the metric reader exports (the
pipeline's ``source``). A process with neither reports nothing rather than a made-up zero.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..._analysis.analysis import Insights
from ..._analysis.efficiency import RankEfficiency
from ..._safety import report_internal_error
from ..._schema import Attr, Metric
from ..._types import JsonValue


class InsightGauges:
    """Observable gauges over the latest :class:`~traincard_otel._analysis.analysis.Insights`.

    A process that draws the live card :meth:`publish`\\ es the analysis its card draws; a process
    with a store reads its own (``source``) when the metric reader exports and nothing newer than
    ``min_age_s`` was published or read (a card too busy to refresh, or no card at all).
    """

    def __init__(
        self,
        meter: Meter,
        source: Callable[[], Insights | None] | None = None,
        min_age_s: float = 1.0,
    ) -> None:
        self._latest: Insights | None = None
        self._source, self._min_age_s, self._read_at = source, min_age_s, -math.inf
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

    def publish(self, insights: Insights) -> None:
        """Keep ``insights`` (the live card's analysis) for the next export; the process reads its
        own store for them only when the card has published nothing for ``min_age_s``."""
        self._latest, self._read_at = insights, time.monotonic()

    def _current(self) -> Insights | None:
        source = self._source
        if source is not None and time.monotonic() - self._read_at >= self._min_age_s:
            self._read_at = time.monotonic()
            try:
                self._latest = source()
            except Exception as exc:
                report_internal_error("insight gauges", exc)
        return self._latest

    def _goodput_time(self, _options: CallbackOptions) -> Iterable[Observation]:
        g = (found := self._current()) and found.goodput
        if not g:
            return []
        return [Observation(v, {Attr.GOODPUT_CATEGORY: k}) for k, v in g.seconds.items() if v == v]

    def _goodput_ratio(self, _options: CallbackOptions) -> Iterable[Observation]:
        g = (found := self._current()) and found.goodput
        ratio = g.ratio if g else None
        return [Observation(ratio)] if ratio is not None else []

    def _per_rank(self, pick: Callable[[RankEfficiency], float | None]) -> list[Observation]:
        e = (found := self._current()) and found.efficiency
        ranks = e.ranks if e else ()
        return [Observation(v, {Attr.RANK: r.rank}) for r in ranks if (v := pick(r)) is not None and v == v]

    def _model_flops(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._per_rank(lambda r: r.achieved_flops)

    def _mfu(self, _options: CallbackOptions) -> Iterable[Observation]:
        return self._per_rank(lambda r: r.mfu)


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
