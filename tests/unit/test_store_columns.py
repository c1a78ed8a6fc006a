"""Compact per-rank columns: typed where values fit, a list where they do not, equal to lists."""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Iterable
from typing import cast

import pyarrow as pa

from traincard_otel._data.rundata import RunData
from traincard_otel._read.load.columns import (
    Column,
    column,
    concat,
    extend,
    from_arrow_floats,
    from_arrow_ints,
    rank_series,
)
from traincard_otel._read.load.reader import StoreReader
from traincard_otel._read.load.records import add_step_columns
from traincard_otel._read.payload.series import (
    HEAD_POINTS,
    MAX_POINTS,
    RANK_MIN_POINTS,
    Mode,
    head,
    rank_points,
    xy,
)
from traincard_otel._store import layout, segment
from traincard_otel._store.backends import Backend


class _Memory:
    """Segments in memory, read as a store."""

    spec = "memory"

    def __init__(self, segments: list[bytes]) -> None:
        self.objects = {layout.segment_name(0, 0, "w1", i + 1): data for i, data in enumerate(segments)}

    def list(self) -> list[str]:
        return list(self.objects)

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        return {n: self.objects[n] for n in names}


def read_segments(segments: list[bytes]) -> RunData:
    return StoreReader(cast(Backend, _Memory(segments))).read()


def test_a_column_reads_like_a_list_and_stays_typed() -> None:
    steps = column("q", range(1, 101))
    assert isinstance(steps, array) and steps.typecode == "q"
    assert steps == list(range(1, 101)) and list(range(1, 101)) == steps
    assert steps != list(range(1, 100)) and steps[-1] == 100 and type(steps[0]) is int
    steps = extend(steps, list(range(101, 201)))  # a long list goes in one packed call
    assert isinstance(steps, Column) and steps == list(range(1, 201))


def test_a_value_that_does_not_fit_turns_the_column_into_a_list_and_keeps_everything() -> None:
    steps = column("q", list(range(1, 41)))
    steps = extend(steps, [*range(41, 60), "sixty", *range(61, 80)])
    assert type(steps) is list
    assert steps == [*range(1, 60), "sixty", *range(61, 80)]
    assert extend(column("q", [1, 2]), [None]) == [1, 2, None]


def test_concat_keeps_the_type_only_when_both_sides_share_it() -> None:
    a, b = column("d", [1.0, 2.0]), column("d", [3.0])
    both = concat(a, b)
    assert isinstance(both, array) and both == [1.0, 2.0, 3.0] and a == [1.0, 2.0]
    assert concat(a, [4.0]) == [1.0, 2.0, 4.0]


def test_arrow_columns_become_arrays_without_losing_nulls() -> None:
    floats = from_arrow_floats(pa.chunked_array([[1.5, None], [2.5]], pa.float64()))
    assert floats[0] == 1.5 and math.isnan(floats[1]) and floats[2] == 2.5
    assert from_arrow_ints(pa.array([3, 4], pa.int64())) == [3, 4]
    assert from_arrow_ints(pa.array([3, None], pa.int64())) == [3, None]
    sliced = pa.array([1.0, 2.0, 3.0, 4.0]).slice(1, 2)  # an offset into the buffer
    assert from_arrow_floats(sliced) == [2.0, 3.0]


def test_a_packed_run_of_step_ends_is_read_as_typed_columns_with_exact_rates() -> None:
    steps = list(range(1, 1001))
    run = segment.step_run(
        steps, [s / 10 for s in steps], [0.5] * 1000, [0.1] * 1000, [32] * 1000, [0] * 1000
    )
    records, corrupt = segment.decode(segment.encode([run]), columns_kept=True)
    assert not corrupt
    rec = records[0]
    data = RunData(source="t")
    add_step_columns(data, rec, attempt=0, rank=3)
    times = data.step_times[3]
    assert isinstance(times.values, array) and times.steps == steps and times.ranks == [3] * 1000
    assert data.throughput["samples_per_second{rank=3}"].values == [64.0] * 1000
    assert "tokens_per_second{rank=3}" not in data.throughput  # no token counts: no series
    assert math.isclose(data.data_wait_total[3], 100.0) and len(data.data_wait[3]) == 1000


def test_a_chart_of_many_ranks_shares_its_points() -> None:
    assert rank_points(1) == rank_points(6) == MAX_POINTS and rank_points(64) == RANK_MIN_POINTS
    series = rank_series("step_time", 0)
    series.steps = extend(series.steps, list(range(100_000)))
    series.values = extend(series.values, [0.01 + (i % 7) / 1000 for i in range(100_000)])
    xs, ys = xy(series, Mode(live=False), max_points=rank_points(64))
    assert len(xs) <= rank_points(64) and max(v for v in ys if v is not None) == 0.016


def test_packed_metric_rows_are_read_as_typed_columns_per_name() -> None:
    steps = list(range(1, 101))
    runs = [
        segment.metric_run(
            "train", ["loss", "lr"], steps, [s / 10 for s in steps], [v for s in steps for v in (1 / s, 0.1)]
        ),
        segment.metric_run("eval", ["loss"], [50, 100], [5.0, 10.0], [0.7, 0.6], {"split": "val"}),
    ]
    data = read_segments([segment.encode(runs)])
    loss = data.metrics["loss"]
    assert isinstance(loss.values, Column) and isinstance(loss.steps, Column)
    assert (
        loss.steps == steps
        and loss.values == [1 / s for s in steps]
        and loss.times == [s / 10 for s in steps]
    )
    assert loss.values[-1] == 0.01 and len(loss) == 100 and list(loss.ranks) == [0] * 100
    assert data.metrics["lr"].values == [0.1] * 100
    assert data.metrics["loss{split=val}"].steps == [50, 100]
    assert data.to_rows()[0] == {
        "metric": "loss",
        "step": 1,
        "value": 1.0,
        "time": 0.1,
        "attempt": 0,
        "rank": 0,
    }


def test_rows_that_do_not_fit_a_typed_column_are_kept_as_lists() -> None:
    rows = [
        segment.metric_run("train", ["loss"], [1, 2], [0.1, 0.2], [0.5, 0.4]),
        {"k": "m", "t": 0.3, "s": None, "p": None, "v": {"loss": 0.3}},  # a row without a step
        {"k": "m", "t": 0.4, "s": 4, "p": None, "v": {"loss": "high"}},  # a value that is not a number
    ]
    loss = read_segments([segment.encode(rows)]).metrics["loss"]
    assert loss.steps == [1, 2, None, 4] and loss.values == [0.5, 0.4, 0.3, "high"]
    assert loss.times == [0.1, 0.2, 0.3, 0.4]


def test_the_live_whole_run_head_is_kept_as_the_series_grows() -> None:
    series = rank_series("loss", 0)
    rng = random.Random(1)
    first = [rng.random() for _ in range(5000)]
    series.steps, series.values = extend(series.steps, range(5000)), extend(series.values, first)
    head(series, "step")
    more = [rng.random() * 3 for _ in range(7000)]
    series.steps, series.values = extend(series.steps, range(5000, 12_000)), extend(series.values, more)
    xs, ys = head(series, "step", refresh_s=0.0)
    fresh = rank_series("loss", 0)
    fresh.steps, fresh.values = extend(fresh.steps, range(12_000)), extend(fresh.values, first + more)
    assert (xs, ys) == head(fresh, "step") and len(xs) <= HEAD_POINTS
    values = first + more
    assert max(ys) == max(values) and min(ys) == min(values)  # the extremes survive
    assert xs == sorted(xs)
