"""A gang's failed and hung ranks as metrics, through the OTel SDK's own in-memory reader."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from traincard_otel._schema import Metric
from traincard_otel._write.pipeline.insight_gauges import GangGauges


def _points(reader: InMemoryMetricReader, name: str) -> list[dict[str, Any]]:
    data = reader.get_metrics_data()
    if data is None:  # no instrument observed anything
        return []
    return [
        {**dict(p.attributes or {}), "value": p.value}
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
        if isinstance(p, NumberDataPoint)
    ]


def _rank(rank: int, node: int, **facts: Any) -> dict[str, Any]:
    return {"rank": rank, "node": node, "host": f"n{node}", "step": 14, **facts}


def test_failed_ranks_are_counted_once_and_the_first_follows_the_newest_analysis() -> None:
    reader = InMemoryMetricReader()
    gauges = GangGauges(MeterProvider(metric_readers=[reader]).get_meter("t"))
    assert _points(reader, Metric.GANG_RANK_FAILURES.name) == []  # nothing failed: no series
    # Rank 0's exception is known before the agent's record of rank 3's SIGKILL.
    gauges.publish({"first_failure": _rank(0, 0, how="raised RuntimeError", consequences=[]), "hung": []})
    gauges.publish(
        {
            "first_failure": _rank(
                3,
                1,
                signal=9,
                consequences=[_rank(0, 0, how="raised RuntimeError"), _rank(2, 1, hung=True)],
            ),
            "hung": [],
        }
    )
    points = {p["traincard.rank"]: p for p in _points(reader, Metric.GANG_RANK_FAILURES.name)}
    assert set(points) == {0, 3}  # rank 2 stopped waiting for the others: alive, not failed
    assert points[3]["traincard.failure.first"] is True and points[3]["traincard.signal"] == 9
    assert points[3]["traincard.node_index"] == 1 and points[3]["host.name"] == "n1"
    assert points[0]["traincard.failure.first"] is False and "traincard.signal" not in points[0]
    assert all(p["value"] == 1 for p in points.values())


def test_hung_ranks_are_a_gauge_of_the_ranks_hung_now() -> None:
    reader = InMemoryMetricReader()
    gauges = GangGauges(MeterProvider(metric_readers=[reader]).get_meter("t"))
    hung = _rank(3, 1, hung=True, consequences=[_rank(0, 0, hung=True)])
    gauges.publish({"first_failure": hung, "hung": [_rank(3, 1)]})
    points = _points(reader, Metric.GANG_RANKS_HUNG.name)
    assert [(p["traincard.rank"], p["traincard.node_index"], p["value"]) for p in points] == [(3, 1, 1)]
    assert _points(reader, Metric.GANG_RANK_FAILURES.name) == []  # a hung rank has not ended
    gauges.publish({"first_failure": None, "hung": []})  # it came back
    assert _points(reader, Metric.GANG_RANKS_HUNG.name) == []


def test_a_hung_culprit_says_where_its_stack_is_stuck() -> None:
    reader = InMemoryMetricReader()
    gauges = GangGauges(MeterProvider(metric_readers=[reader]).get_meter("t"))
    where = "in fetch_batch at data.py:41"
    culprit = _rank(1, 0, hung=True, culprit=True, where=where, consequences=[_rank(0, 0, hung=True)])
    gauges.publish({"first_failure": culprit, "hung": [_rank(1, 0)]})
    points = _points(reader, Metric.GANG_RANKS_HUNG.name)
    assert [(p["traincard.rank"], p.get("traincard.stack.where")) for p in points] == [(1, where)]
