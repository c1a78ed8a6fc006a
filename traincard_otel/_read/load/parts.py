"""A compacted part (Parquet, :mod:`traincard_otel._store.part_format`) added to a
:class:`~traincard_otel._data.rundata.RunData` a column at a time: its metric rows by
:mod:`.part_columns` (or, for a part of one row per value, :mod:`.part_metrics`), its step ends
and the records it keeps whole here."""

from __future__ import annotations

import json
from array import array

from ..._data.rundata import DATA_WAIT_TAIL, RunData
from ..._store.part_format import ANATOMY_COLUMNS, STEP_FIELDS
from ..._store.segment import WIDTH
from ..._types import Foreign
from .columns import from_arrow_floats, from_arrow_ints, rank_series
from .part_metrics import Slots, count, equal, kept, reserve, write
from .records import add_anatomy, add_record, extend_series, trim


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
    """A part's step ends and the records it keeps whole, from rows of both kinds (``table``:
    its rows other than metric rows, as parts written before step ends had row groups of their
    own keep them)."""
    import pyarrow.compute as pc

    # Filtering a table filters every column it has: select each kind's columns first.
    have = set(table.column_names)
    steps = table.select([c for c in (*STEP_FIELDS, *ANATOMY_COLUMNS) if c in have])
    add_step_rows(data, steps.filter(pc.is_null(table["rest"])), attempt, rank)
    add_kept_records(data, table["rest"], attempt, rank)


def add_kept_records(data: RunData, rest: Foreign, attempt: int, rank: int) -> None:
    """The records a part keeps whole (``rest``: their JSON; nulls are rows of other kinds)."""
    import pyarrow.compute as pc

    for text in rest.filter(pc.is_valid(rest)).to_pylist():
        add_record(data, json.loads(text), attempt, rank)


def add_step_rows(data: RunData, steps: Foreign, attempt: int, rank: int) -> None:
    """A part's step ends (``s``, ``value`` the duration, ``t``, and ``w``, ``n``, ``tok`` and the
    anatomy's ``a_*`` columns when the part has them), a column at a time.

    No Python value becomes an Arrow one here: pyarrow imports pandas on the first such
    conversion (0.3 s and 35 MB of a ``load()``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if steps["value"].null_count:  # a step end without a duration adds no point, as in a segment
        steps = steps.filter(pc.is_valid(steps["value"]))
    if not steps.num_rows:
        return
    series = data.step_times.get(rank)
    if series is None:
        series = data.step_times[rank] = rank_series("step_time", rank)
    s = from_arrow_ints(steps["s"])
    durations, times = from_arrow_floats(steps["value"]), from_arrow_floats(steps["t"])
    extend_series(series, s, durations, times, attempt, rank)
    have = set(steps.column_names)
    if have.issuperset(ANATOMY_COLUMNS) and any(
        steps[c].null_count < steps.num_rows for c in ANATOMY_COLUMNS
    ):
        flat = array("d", bytes(8 * WIDTH * steps.num_rows))
        for j, name in enumerate(ANATOMY_COLUMNS):  # row-major, as a segment holds them
            flat[j::WIDTH] = from_arrow_floats(steps[name])
        add_anatomy(data, rank, s, times, durations, flat, attempt)
    if "w" in have and steps["w"].null_count < steps.num_rows:
        waited = steps.filter(pc.is_valid(steps["w"])) if steps["w"].null_count else steps
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
        if column not in have or steps[column].null_count == steps.num_rows:
            continue
        # a rate where a count and a duration are known (a step without a duration was dropped above)
        has = pc.and_(pc.cast(steps[column], pa.bool_()), pc.cast(steps["value"], pa.bool_()))
        if not pc.any(has).as_py():
            continue
        every = not has.null_count and pc.all(has).as_py()
        counted = steps if every else steps.filter(has)  # a null (no count) is not kept
        key = f"{tname}{{rank={rank}}}"
        tput = data.throughput.get(key)
        if tput is None:
            tput = data.throughput[key] = rank_series(tname, rank)
        rates = pc.divide(pc.cast(counted[column], pa.float64()), counted["value"])
        extend_series(
            tput,
            s if counted is steps else from_arrow_ints(counted["s"]),
            from_arrow_floats(rates),
            from_arrow_floats(counted["t"]),
            attempt,
            rank,
        )
