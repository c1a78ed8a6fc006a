"""The metric rows of parts with metric columns (:mod:`traincard_otel._store.part_format`) into
their series.

A part holds one row per reported step and one float column per metric name, so a series is its
name's column and the part's step and time columns, the rows where it has a value: slices of the
part when every row has one. The parts of one read are gathered first, then each series' columns
are built once from all their pieces, one column at a time (growing eight series' five columns
part by part made them reallocate and copy each other out of place).
"""

from __future__ import annotations

import dataclasses
import json
from array import array
from collections.abc import Callable, MutableSequence, Sequence

from ..._data.rundata import RunData
from ..._schema.keys import series_key
from ..._store.part_format import metric_column
from ..._types import Foreign, JsonValue
from .columns import SMALL, Column, Shared, extend, from_arrow_floats, from_arrow_ints, repeat, typed_series


@dataclasses.dataclass
class _Pieces:
    """One series' rows in the parts of a read: Arrow arrays, in report order."""

    name: str
    tags: dict[str, str] | None
    steps: list[Foreign] = dataclasses.field(default_factory=list)
    values: list[Foreign] = dataclasses.field(default_factory=list)
    times: list[Foreign] = dataclasses.field(default_factory=list)
    owners: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)  # attempt, rank, rows


#: Each series' pieces (by its key), in order of first appearance.
Pieces = dict[str, _Pieces]


def _tag_groups(metric: Foreign) -> list[tuple[str | None, Foreign | None]]:
    """Each tags value of the metric rows (JSON, None untagged) and its rows (None: every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tags = metric["g"]
    if tags.null_count == len(tags):
        return [(None, None)]
    plain = pc.cast(tags, pa.string())
    groups: list[tuple[str | None, Foreign | None]] = []
    values = pc.unique(plain)
    for i, value in enumerate(values.to_pylist()):
        # compared with a scalar of the column's own (a Python value would make pyarrow import pandas)
        rows = pc.is_null(plain) if value is None else pc.equal(plain, values[i])
        groups.append((value, rows))
    return groups


def collect(names: list[str], metric: Foreign, skip: set[int], attempt: int, rank: int, into: Pieces) -> int:
    """Add the metric rows of a part (:func:`~traincard_otel._store.part_format.read_columns`; rows
    of segments in ``skip`` left out) to ``into``; returns how many rows were added."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .part_metrics import kept

    metric = kept(metric, skip)
    if not metric.num_rows:
        return 0
    groups = _tag_groups(metric)
    found = []  # added once the whole part is read: a part that fails half-way adds nothing
    every_step, every_time = metric["s"], metric["t"]  # one object each: series may share them
    for i, name in enumerate(names):
        column = metric[metric_column(i)]
        for tags_json, rows in groups:
            if rows is None and not column.null_count:  # every row: the part's own columns
                steps, times, values = every_step, every_time, column
            else:
                has = pc.is_valid(column) if rows is None else pc.and_(pc.is_valid(column), rows)
                picked = pa.table({"s": metric["s"], "t": metric["t"], "v": column}).filter(has)
                if not picked.num_rows:
                    continue
                steps, times, values = picked["s"], picked["t"], picked["v"]
            found.append((name, json.loads(tags_json) if tags_json else None, steps, times, values))
    for name, tags, steps, times, values in found:
        key = series_key(name, tags)
        pieces = into.get(key)
        if pieces is None:
            pieces = into[key] = _Pieces(name, tags)
        pieces.steps.append(steps)
        pieces.values.append(values)
        pieces.times.append(times)
        pieces.owners.append((attempt, rank, len(values)))
    return int(metric.num_rows)


def fill(data: RunData, pieces: Pieces, *, share: bool = False) -> None:
    """Append each series' pieces to its columns (a series not yet in ``data`` is added).

    ``share``: series whose rows are the same rows of the same parts (every metric of a run
    reported at every step) get one :class:`~.columns.Shared` column of steps, times, attempts
    and ranks (a read that nothing extends: a shared column is copied before it grows).
    """
    import pyarrow as pa

    built: dict[tuple[object, ...], MutableSequence[JsonValue]] = {}
    kind = Shared if share else Column

    def once(
        key: tuple[object, ...], make: Callable[..., MutableSequence[JsonValue]], *args: object
    ) -> MutableSequence[JsonValue]:
        if not share:
            return make(*args)
        col = built.get(key)
        if col is None:
            col = built[key] = make(*args)
        return col

    for key in list(pieces):
        got = pieces[key]
        series = data.metrics.get(key)
        if series is None:
            series = data.metrics[key] = typed_series(got.name, got.tags)
        owners = tuple(got.owners)
        steps = _chunks(got.steps, pa.int64())
        times = _chunks(got.times, pa.float64())
        columns = (
            ("steps", once(("steps", *map(id, got.steps)), from_arrow_ints, steps, kind)),
            ("values", from_arrow_floats(_chunks(got.values, pa.float64()))),
            ("times", once(("times", *map(id, got.times)), from_arrow_floats, times, kind)),
            ("attempts", once(("attempts", owners), _labels, owners, 0, kind)),
            ("ranks", once(("ranks", owners), _labels, owners, 1, kind)),
        )
        empty = not len(series.values)
        for field, column in columns:
            setattr(series, field, column if empty else extend(getattr(series, field), column))
        got.values.clear()  # its Arrow memory goes as soon as its columns are built
    pieces.clear()


def _chunks(pieces: list[Foreign], type_: Foreign) -> Foreign:
    """Chunked arrays as one, sharing their chunks (never a Python object per value)."""
    import pyarrow as pa

    return pa.chunked_array([chunk for piece in pieces for chunk in piece.chunks], type_)


def _labels(owners: Sequence[tuple[int, int, int]], which: int, kind: type[Column]) -> Column:
    """The attempt (``which`` 0) or rank (1) of each row of ``owners``' pieces (a ``kind``): one
    repeat per run of pieces with the same label (usually one for the whole series)."""
    out = kind(SMALL)
    at = 0
    while at < len(owners):
        label, n, at = owners[at][which], owners[at][2], at + 1
        while at < len(owners) and owners[at][which] == label:
            n, at = n + owners[at][2], at + 1
        array.extend(out, repeat(SMALL, label, n))
    return out
