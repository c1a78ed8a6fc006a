"""A run's insights, computed once from its :class:`~traincard_otel._data.rundata.RunData`.

:func:`analyse` is the one place the analysis of a read run is put together: goodput
(:mod:`.goodput`), accelerator efficiency and MFU (:mod:`.efficiency`), the anomalies the
converter's detector recorded (:mod:`.anomalies`), the comparison with a baseline run
(:mod:`.baseline`), a gang's diagnosis (:mod:`.gang`) and each rank's step anatomy
(:mod:`.anatomy`). Its typed result, :class:`Insights`, is what the card's payload builders,
``load()`` and the pipeline's OTel gauges all read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

from .._data.rundata import RunData
from .._schema import Attr, Event
from .._schema.anomaly_kinds import RENAMED
from .._types import JsonObject, JsonValue
from .agents import AgentLoop, agent_loop
from .anatomy import StepAnatomy, step_anatomy
from .baseline import Baseline, Comparison, compare
from .efficiency import Efficiency, efficiency
from .gang.attribution import settle
from .goodput import Goodput, goodput


@dataclasses.dataclass(frozen=True)
class RecordedAnomaly:
    """One ``traincard.anomaly`` event the converter's detector recorded."""

    step: int | None
    kind: str
    metric: str
    text: str
    time: float | None
    rank: int
    attempt: int


@dataclasses.dataclass(frozen=True)
class Insights:
    """What the analysis makes of a run at ``now``; each part None (or empty) when the run has
    nothing for it."""

    now: float
    goodput: Goodput | None
    efficiency: Efficiency | None
    anomalies: tuple[RecordedAnomaly, ...]
    comparison: Comparison | None
    gang: JsonObject | None  # the gang's diagnosis (:func:`.gang.attribution.analyze`)
    agents: AgentLoop | None = None  # the agent loop of captured GenAI spans (:mod:`.agents`)
    anatomy: StepAnatomy | None = None  # where each rank's step time goes (:mod:`.anatomy`)


def _int(value: JsonValue, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _kind(name: str) -> str:
    return RENAMED.get(name, name)  # an older store's name of a kind


def recorded_anomalies(data: RunData) -> tuple[RecordedAnomaly, ...]:
    """Every anomaly recorded in ``data``'s events, oldest first."""
    out = []
    for e in data.events:
        if e.get("name") != Event.ANOMALY:
            continue
        a: Mapping[str, JsonValue] = e.get("attributes") or {}
        step = a.get(Attr.STEP)
        at = e.get("time")
        out.append(
            RecordedAnomaly(
                step=step if isinstance(step, int) and step >= 0 else None,
                kind=_kind(str(a.get(Attr.ANOMALY_KIND, ""))),
                metric=str(a.get(Attr.METRIC_NAME, "")),
                text=str(e.get("body") or ""),
                time=float(at) if isinstance(at, int | float) else None,
                rank=_int(e.get("rank")),
                attempt=_int(e.get("attempt")),
            )
        )
    out.sort(key=lambda r: r.time or 0.0)
    return tuple(out)


def analyse(data: RunData, *, now: float | None = None, baseline: Baseline | None = None) -> Insights:
    """The insights of ``data`` at ``now`` (default: the current time), compared with ``baseline``.

    The diagnosis of several ranks is also kept in ``data.gang`` (``summary``, and its first
    ``failure``, which :attr:`RunData.status <traincard_otel._data.rundata.RunData.status>` reports
    as the run's).
    """
    now = time.time() if now is None else now
    anatomy = step_anatomy(data)
    # several ranks (a Metaflow gang, torchrun, accelerate, srun)
    gang = settle(data, now, anatomy.straggler if anatomy is not None else None)
    base = baseline.data if baseline is not None else None
    return Insights(
        now=now,
        goodput=goodput(data, now),
        efficiency=efficiency(data),
        anomalies=recorded_anomalies(data),
        comparison=compare(data, base, baseline.label) if baseline is not None and base is not None else None,
        gang=gang,
        agents=agent_loop(data),
        anatomy=anatomy,
    )
