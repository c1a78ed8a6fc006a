"""The metric rows of compacted parts into their series: each series' columns grown once for all
the parts of a read, then filled a run at a time.

A long run is tens of parts of about 100k rows each. Extending eight series' five columns part by
part made every column reallocate and copy itself at each part, the allocations interleaved so
that none could grow in place: that copying was the largest cost of reading a 1M-step run. So a
read first counts each series' rows in its parts (the name and tag columns only, dictionary
codes, no string per row), grows every column once by that count, then writes each part's rows
into their slots.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import MutableSequence

from ..._data.rundata import RunData, Series
from ..._schema.keys import series_key
from ..._types import Foreign, JsonValue
from .columns import SMALL, from_arrow_floats, from_arrow_ints, own, repeat, typed_series

#: The part columns :func:`count` reads (``seq`` only when rows are skipped).
COUNT_COLUMNS = ("k", "name", "g", "rest")

#: The columns every part of one row per value has.
ROW_COLUMNS = ("seq", "k", "t", "s", "name", "value", "g", "rest")

#: Where the next rows of each series go (its key to a position), for the parts of one read.
Slots = dict[str, int]


def kept(table: Foreign, skip: set[int]) -> Foreign:
    """``table`` without the rows of the segments in ``skip`` (already read as segments)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not skip:
        return table
    return table.filter(pc.invert(pc.is_in(table["seq"], value_set=pa.array(sorted(skip), pa.int64()))))


def equal(strings: Foreign, value: str) -> Foreign:
    """``strings == value`` for a string column, dictionary-encoded (compared by code) or not."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(strings.type):
        return pc.equal(strings, value)
    chunks = []
    for chunk in strings.chunks:
        code = chunk.dictionary.index(value).as_py()
        same = pc.fill_null(pc.equal(chunk.indices, code), False) if code >= 0 else None
        chunks.append(same if same is not None else pa.repeat(False, len(chunk)))
    return pa.chunked_array(chunks, pa.bool_())


class _Codes:
    """One integer per metric row of a table for its (name, tags); null for every other row."""

    def __init__(self, table: Foreign) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        names, tags = (
            table[c] if pa.types.is_dictionary(table[c].type) else table[c].dictionary_encode()
            for c in ("name", "g")
        )
        names, tags = pa.table({"name": names, "g": tags}).unify_dictionaries().columns
        self.names = names.chunks[0].dictionary.to_pylist() if names.num_chunks else []
        self.tags = tags.chunks[0].dictionary.to_pylist() if tags.num_chunks else []
        self.width = len(self.tags) + 1  # a name's index times this, plus its tags' index + 1
        name_codes = pa.chunked_array([c.indices for c in names.chunks], names.type.index_type)
        tag_codes = pa.chunked_array([c.indices for c in tags.chunks], tags.type.index_type)
        codes = pc.add(
            pc.multiply(pc.cast(name_codes, pa.int64()), self.width),
            pc.add(pc.cast(pc.fill_null(tag_codes, -1), pa.int64()), 1),
        )
        metric = pc.and_(equal(table["k"], "m"), pc.is_null(table["rest"]))  # a row kept whole: not here
        self.codes = pc.if_else(metric, codes, pa.scalar(None, pa.int64()))
        counted = pc.value_counts(self.codes).to_pylist()
        self.counts: dict[int, int] = {c["values"]: c["counts"] for c in counted if c["values"] is not None}

    def series(self, code: int) -> tuple[str, str, dict[str, str] | None]:
        """The key, name and tags of ``code``'s series."""
        name, tag_index = self.names[code // self.width], code % self.width
        tags_json = self.tags[tag_index - 1] if tag_index else None
        tags = json.loads(tags_json) if tags_json else None
        return series_key(name, tags), name, tags

    def in_order(self) -> list[int]:
        """The codes of the metric rows, in order of first appearance."""
        import pyarrow.compute as pc

        return [c for c in pc.unique(self.codes).to_pylist() if c is not None]


def count(table: Foreign, into: dict[str, int], order: list[tuple[str, str, dict[str, str] | None]]) -> None:
    """Add the rows of each series in ``table`` (read with :data:`COUNT_COLUMNS`) to ``into``;
    a series not yet counted joins ``order``."""
    codes = _Codes(table)
    for code in codes.in_order():
        key, name, tags = codes.series(code)
        if key not in into:
            into[key] = 0
            order.append((key, name, tags))
        into[key] += codes.counts[code]


def reserve(
    data: RunData, counts: dict[str, int], order: list[tuple[str, str, dict[str, str] | None]]
) -> Slots:
    """Grow each counted series' columns by its count (once); returns where its rows go."""
    slots: Slots = {}
    for key, name, tags in order:
        series = data.metrics.get(key)
        if series is None:
            series = data.metrics[key] = typed_series(name, tags)
        slots[key] = len(series.values)
        for field in ("steps", "values", "times", "attempts", "ranks"):
            setattr(series, field, _grow(getattr(series, field), counts[key]))
    return slots


def _grow(col: MutableSequence[JsonValue], n: int) -> MutableSequence[JsonValue]:
    col = own(col)
    if isinstance(col, array):
        col.frombytes(bytes(col.itemsize * n))
    else:
        col.extend([0] * n)
    return col


def _put(
    col: MutableSequence[JsonValue], at: int, piece: MutableSequence[JsonValue]
) -> MutableSequence[JsonValue]:
    """``col`` with ``piece`` written over its slots from ``at`` (a list if it cannot stay typed)."""
    if isinstance(col, array) and isinstance(piece, array) and piece.typecode == col.typecode:
        col[at : at + len(piece)] = piece
        return col
    out = col.tolist() if isinstance(col, array) else col
    out[at : at + len(piece)] = list(piece)
    return out


def write(data: RunData, table: Foreign, attempt: int, rank: int, slots: Slots) -> None:
    """Write the metric rows of ``table`` into the slots :func:`reserve` made, in report order."""
    import pyarrow.compute as pc

    codes = _Codes(table)
    if not codes.counts:
        return
    # a stable sort by code: each series' rows together, in report order; other rows last
    order = pc.sort_indices(codes.codes).slice(0, sum(codes.counts.values()))
    rows = table.select(["s", "value", "t"]).take(order)
    starts, at = {}, 0
    for code in sorted(codes.counts):
        starts[code], at = at, at + codes.counts[code]
    for code in codes.in_order():
        key, name, tags = codes.series(code)
        n, run = codes.counts[code], rows.slice(starts[code], codes.counts[code])
        series = data.metrics.get(key)
        if series is None or key not in slots:  # not counted beforehand: appended
            series = data.metrics.setdefault(key, typed_series(name, tags))
            slots[key] = len(series.values)
        pos = slots[key]
        series.steps = _put(series.steps, pos, from_arrow_ints(run["s"]))
        series.values = _put(series.values, pos, from_arrow_floats(run["value"]))
        series.times = _put(series.times, pos, from_arrow_floats(run["t"]))
        series.attempts = _put(series.attempts, pos, repeat(SMALL, attempt, n))
        series.ranks = _put(series.ranks, pos, repeat(SMALL, rank, n))
        slots[key] = pos + n


def release(data: RunData, slots: Slots, ends: Slots) -> None:
    """Remove the slots left unwritten (a part that could be counted but not read)."""
    for key, end in ends.items():
        if slots[key] < end:
            series: Series = data.metrics[key]
            for field in ("steps", "values", "times", "attempts", "ranks"):
                del getattr(series, field)[slots[key] : end]
