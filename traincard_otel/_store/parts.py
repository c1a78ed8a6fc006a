"""A compacted part (Parquet, :mod:`.compaction`) added to a
:class:`~traincard_otel._data.rundata.RunData` a column at a time."""

from __future__ import annotations

import json

from .._data.rundata import DATA_WAIT_TAIL, RunData, Series
from .._schema.keys import series_key
from .._types import Foreign
from .columns import from_arrow_floats, from_arrow_ints, rank_series
from .records import add_record, extend_series, trim


def add_table(data: RunData, table: Foreign, skip: set[int], attempt: int, rank: int) -> int:
    """Add a compacted part, a column at a time; rows of segments already read are skipped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if skip:
        table = table.filter(pc.invert(pc.is_in(table["seq"], value_set=pa.array(sorted(skip), pa.int64()))))
    kinds, whole = table["k"], pc.is_valid(table["rest"])  # a record kept whole is read as one
    columnar = pc.invert(whole)
    # Filtering a table filters every column it has: select each kind's columns first.
    have = set(table.column_names)
    metrics = table.select([c for c in ("name", "g", "s", "value", "t") if c in have])
    metrics = metrics.filter(pc.and_(pc.equal(kinds, "m"), columnar))
    for combo in metrics.group_by(["name", "g"]).aggregate([]).to_pylist():
        name, tags_json = combo["name"], combo["g"]
        tags = json.loads(tags_json) if tags_json else None
        mask = pc.equal(metrics["name"], name)
        mask = pc.and_(mask, pc.equal(metrics["g"], tags_json) if tags_json else pc.is_null(metrics["g"]))
        rows = metrics.filter(mask)
        key = series_key(name, tags)
        series = data.metrics.get(key)
        if series is None:
            series = data.metrics[key] = Series(name=name, tags=dict(tags or {}))
        extend_series(
            series, rows["s"].to_pylist(), rows["value"].to_pylist(), rows["t"].to_pylist(), attempt, rank
        )
    # A step end without a duration adds no point, as in a segment.
    steps = table.select([c for c in ("s", "value", "t", "w", "n", "tok") if c in have])
    steps = steps.filter(pc.and_(pc.and_(pc.equal(kinds, "st"), columnar), pc.is_valid(table["value"])))
    if steps.num_rows:
        series = data.step_times.get(rank)
        if series is None:
            series = data.step_times[rank] = rank_series("step_time", rank)
        s = from_arrow_ints(steps["s"])
        extend_series(
            series, s, from_arrow_floats(steps["value"]), from_arrow_floats(steps["t"]), attempt, rank
        )
        waited = steps.filter(pc.is_valid(steps["w"])) if "w" in steps.column_names else None
        if waited is not None and waited.num_rows:
            waited_s = float(pc.sum(waited["w"]).as_py())
            data.data_wait_total[rank] = data.data_wait_total.get(rank, 0.0) + waited_s
            waits = data.data_wait.get(rank)
            if waits is None:
                waits = data.data_wait[rank] = rank_series("data_wait", rank)
            tail = waited.slice(max(0, waited.num_rows - DATA_WAIT_TAIL))
            extend_series(
                waits,
                from_arrow_ints(tail["s"]),
                from_arrow_floats(tail["w"]),
                from_arrow_floats(tail["t"]),
                attempt,
                rank,
            )
            trim(waits)
        for column, tname in (("n", "samples_per_second"), ("tok", "tokens_per_second")):
            # a rate where a count and a duration are known (a step without a duration was dropped above)
            has = pc.and_(pc.not_equal(steps[column], 0), pc.not_equal(steps["value"], 0))
            counted = steps.filter(pc.fill_null(has, False))
            if counted.num_rows:
                key = f"{tname}{{rank={rank}}}"
                tput = data.throughput.get(key)
                if tput is None:
                    tput = data.throughput[key] = rank_series(tname, rank)
                rates = pc.divide(pc.cast(counted[column], pa.float64()), counted["value"])
                extend_series(
                    tput,
                    from_arrow_ints(counted["s"]),
                    from_arrow_floats(rates),
                    from_arrow_floats(counted["t"]),
                    attempt,
                    rank,
                )
    for rest in table["rest"].filter(whole).to_pylist():
        add_record(data, json.loads(rest), attempt, rank)
    return int(table.num_rows)  # pyarrow is untyped
