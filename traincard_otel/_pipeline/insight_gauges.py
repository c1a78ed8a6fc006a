"""Goodput and MFU as OTel gauges, the same figures the live card shows.

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
