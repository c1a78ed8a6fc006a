"""Compact columns for long series: typed arrays (8 bytes a float) instead of Python lists.

A list of floats costs about 32 bytes a point (a pointer and a float object), five columns to a
point; a 64-rank gang of 100k steps holds 13 million step-time and throughput points. Read series
keep their columns as :class:`Column` (an ``array.array`` that compares equal to the list of its
items, so code and tests that read a column as a list keep working). A column falls back to a
plain list when a value does not fit its type (a step that is not an integer, e.g. a string a
hostile store holds): nothing is dropped or coerced.

Arrow columns are turned into arrays from their buffers, without numpy and without a Python object
per value. The metric series read from the same compacted parts have the same steps, times,
attempts and ranks: they hold one :class:`Shared` column each (a 1M-step run of eight metrics
holds 88 bytes a row instead of 256), which is read-only and copied before it grows (:func:`own`).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, MutableSequence, Sequence

from ..._data.rundata import Series
from ..._types import Foreign, JsonValue

FLOAT, INT, SMALL = "d", "q", "i"  # values and times; steps; attempts and ranks


class Column(array):  # type: ignore[type-arg]  # the element type is the typecode's, chosen at run time
    """A typed array that compares equal to a list (or any sequence) of the same items."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, array):
            return array.__eq__(self, other)
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # mutable, like a list

    def __repr__(self) -> str:
        return f"Column({self.typecode!r}, {len(self)} items)"


def _read_only(self: array, *args: object, **kwargs: object) -> None:  # type: ignore[type-arg]
    raise TypeError("this column is shared by several series and read-only: copy it first (Column(col))")


class Shared(Column):
    """A :class:`Column` that several series hold: every method that would change it raises."""

    append = extend = insert = pop = remove = reverse = byteswap = _read_only
    frombytes = fromlist = fromfile = fromunicode = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Shared({self.typecode!r}, {len(self)} items)"


def own(col: MutableSequence[JsonValue]) -> MutableSequence[JsonValue]:
    """``col``, or a copy of it that this series alone holds if it is :class:`Shared`."""
    if not isinstance(col, Shared):
        return col
    out = Column(col.typecode)
    out.frombytes(memoryview(col).cast("B"))
    return out


def column(typecode: str, items: Iterable[JsonValue] = ()) -> MutableSequence[JsonValue]:
    """A new column of ``typecode`` holding ``items`` (a list when they do not fit)."""
    return extend(Column(typecode), items)


def extend(col: MutableSequence[JsonValue], items: Iterable[JsonValue]) -> MutableSequence[JsonValue]:
    """``col`` extended by ``items``; returns the column to keep (a list when they did not fit)."""
    col = own(col)
    if not isinstance(col, array):
        col.extend(items)
        return col
    n = len(col)
    try:
        if isinstance(items, array) and items.typecode != col.typecode:
            items = items.tolist()
        if isinstance(items, list) and len(items) > 16:
            # packed in one C call: several times faster than an array taking a list item by item
            col.frombytes(struct.pack(f"{len(items)}{col.typecode}", *items))
        else:
            col.extend(items)
    except (TypeError, OverflowError, ValueError, struct.error):
        del col[n:]  # an array extended item by item keeps those it took before the failure
        as_list: list[JsonValue] = col.tolist()
        as_list.extend(items)
        return as_list
    return col


def repeat(typecode: str, value: int, n: int) -> array:  # type: ignore[type-arg]
    """``n`` copies of ``value`` as an array (extends a column at C speed)."""
    return array(typecode, [value]) * n


def concat(a: Sequence[JsonValue], b: Sequence[JsonValue]) -> MutableSequence[JsonValue]:
    """A new column holding ``a`` then ``b`` (typed when both are of one type)."""
    if isinstance(a, array) and isinstance(b, array) and a.typecode == b.typecode:
        out = Column(a.typecode)
        out.extend(a)
        out.extend(b)
        return out
    return [*a, *b]


def _chunk_view(chunk: Foreign, width: int) -> memoryview:
    data = chunk.buffers()[1]
    start = chunk.offset * width
    return memoryview(data)[start : start + len(chunk) * width]


def from_arrow_floats(values: Foreign, kind: type[Column] = Column) -> Column:
    """A float64 Arrow array (or chunked array) as a float column (a ``kind``), nulls as NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if values.null_count:
        values = pc.fill_null(values, float("nan"))
    out = kind(FLOAT)
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    for chunk in chunks:
        if len(chunk):
            array.frombytes(out, _chunk_view(chunk.cast(pa.float64()), 8))
    return out


def from_arrow_ints(values: Foreign, kind: type[Column] = Column) -> MutableSequence[JsonValue]:
    """An int64 Arrow array as an int column (a ``kind``); a list (``None`` kept) when it has nulls."""
    import pyarrow as pa

    if values.null_count:
        return list(values.to_pylist())
    out = kind(INT)
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    for chunk in chunks:
        if len(chunk):
            array.frombytes(out, _chunk_view(chunk.cast(pa.int64()), 8))
    return out


def typed_series(name: str, tags: dict[str, str] | None = None) -> Series:
    """An empty series with compact columns (a run of 1M steps holds millions of points)."""
    return Series(
        name=name,
        tags=dict(tags or {}),
        steps=Column(INT),
        values=Column(FLOAT),
        times=Column(FLOAT),
        attempts=Column(SMALL),
        ranks=Column(SMALL),
    )


def rank_series(name: str, rank: int) -> Series:
    """An empty per-rank series with compact columns (a gang holds one per rank, each run long)."""
    return typed_series(name, {"rank": str(rank)})
