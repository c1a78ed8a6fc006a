"""A compacted part (Parquet, :mod:`.compaction`) added to a
:class:`~traincard_otel._data.rundata.RunData` a column at a time: its metric rows by
:mod:`.part_columns` (or, for a part of one row per value, :mod:`.part_metrics`), its step ends
and other records here."""

from __future__ import annotations

import json
from array import array

from .._data.rundata import DATA_WAIT_TAIL, RunData
from .._schema import STEP_PARTS
from .._types import Foreign
from .columns import from_arrow_floats, from_arrow_ints, rank_series
from .part_metrics import Slots, count, equal, kept, reserve, write
from .records import add_anatomy, add_record, extend_series, trim
from .segment import WIDTH


def add_table(
    data: RunData, table: Foreign, skip: set[int], attempt: int, rank: int, slots: Slots | None = None
) -> int:
    """Add a compacted part of one row per metric value, a column at a time; rows of segments
    already read are skipped.

    ``slots``: where each metric series' rows go (:func:`.part_metrics.reserve`); without them
    the series are grown by this part's rows.
    """
    table = kept(table, skip)
    if slots is None:
        counts: dict[str, int] = {}
        order: list[tuple[str, str, dict[str, str] | None]] = []
        count(table, counts, order)
        slots = reserve(data, counts, order)
    write(data, table, attempt, rank, slots)
    import pyarrow.compute as pc

    # its metric rows are added: the step ends and the records kept whole (a row kept whole as one)
    add_other_rows(
        data,
        table.filter(pc.or_(pc.invert(equal(table["k"], "m")), pc.is_valid(table["rest"]))),
        attempt,
        rank,
    )
    return int(table.num_rows)  # pyarrow is untyped


def add_other_rows(data: RunData, table: Foreign, attempt: int, rank: int) -> None:
    """A part's step ends (a column at a time) and the records it keeps whole (``table``: its
    rows other than metric rows).

    No Python value becomes an Arrow one here: pyarrow imports pandas on the first such
    conversion (0.3 s and 35 MB of a ``load()``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    # Filtering a table filters every column it has: select each kind's columns first.
    have = set(table.column_names)
    # A step end is a row not kept whole; one without a duration adds no point, as in a segment.
    part_columns = [f"a_{part}" for part in STEP_PARTS if f"a_{part}" in have]
    steps = table.select([c for c in ("s", "value", "t", "w", "n", "tok") if c in have] + part_columns)
    steps = steps.filter(pc.and_(pc.is_null(table["rest"]), pc.is_valid(table["value"])))
    if steps.num_rows:
        series = data.step_times.get(rank)
        if series is None:
            series = data.step_times[rank] = rank_series("step_time", rank)
        s = from_arrow_ints(steps["s"])
        durations, times = from_arrow_floats(steps["value"]), from_arrow_floats(steps["t"])
        extend_series(series, s, durations, times, attempt, rank)
        if len(part_columns) == WIDTH:
            flat = array("d", bytes(8 * WIDTH * steps.num_rows))
            for j, name in enumerate(part_columns):  # row-major, as a segment holds them
                flat[j::WIDTH] = from_arrow_floats(steps[name])
            add_anatomy(data, rank, s, times, durations, flat, attempt)
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
            has = pc.and_(pc.cast(steps[column], pa.bool_()), pc.cast(steps["value"], pa.bool_()))
            counted = steps.filter(has)  # a null (no count) is not kept
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
    for rest in table["rest"].filter(pc.is_valid(table["rest"])).to_pylist():
        add_record(data, json.loads(rest), attempt, rank)
