"""Columnar compaction: many closed JSON-lines segments -> one Parquet part (pyarrow, lazily).

A part ``part-<first>-<last>.parquet`` holds every record of its writer's segments ``first..last``,
each kind in record order and in row groups of its own: first the metric rows (``k == "m"``), one
row per reported step with one float column per metric name (``m0``, ``m1``, ...: null where that
row has no value for it; the names are the schema's ``traincard_metrics`` metadata), then the step
ends (``"st"``: ``s``, ``t``, the duration in ``value``, ``w``, ``n``, ``tok``, and the step's
anatomy in ``a_data``, ``a_forward``, ...: null where not measured), then every other record (kept
whole as JSON in ``rest``). The metadata counts the metric rows and the step ends
(``traincard_metric_rows``, ``traincard_step_rows``), so a reader reads each kind's columns only:
a metric series or the step times are column reads, with no row filtered. Each row keeps the
segment it came from (``seq``), so a reader that already read some of those segments skips exactly
their rows: no duplicates, no gaps, while segments and parts coexist.

Parts written before the step ends had row groups of their own (no ``traincard_step_rows``: the
step ends and the other records share them) and before the metric columns (one row per metric
value, its name in ``name``, no ``traincard_metrics`` metadata) stay readable
(:mod:`traincard_otel._read.load.parts`, :mod:`traincard_otel._read.load.part_metrics`); the
format's names and its readers are :mod:`traincard_otel._store.part_format`.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import sys
from array import array
from collections.abc import Iterable, Sequence

from ..._gil import Slices
from ..._store.part_format import (
    ANATOMY_COLUMNS,
    DICTIONARY_COLUMNS,
    METRIC_ROWS_KEY,
    METRICS_KEY,
    SCHEMA_FIELDS,
    STEP_ROWS_KEY,
    metric_column,
)
from ..._store.segment import PACKED_METRICS, PACKED_STEPS, WIDTH, Record, encode_line
from ..._types import Foreign

_LITTLE = sys.byteorder == "little"

# Parquet column <- packed step run field (the duration is the step row's ``value``).
_STEP_COLUMNS = (("s", "s"), ("n", "n"), ("tok", "tok"), ("t", "t"), ("value", "d"), ("w", "w"))


class _Columns:
    """The per-row columns of one kind, extended a whole packed run at a time: numbers as typed
    arrays (``int64`` or ``float64`` Arrow columns built from their buffers), strings as dictionary
    codes. No Python value is converted to an Arrow one (pyarrow imports pandas for the first
    such conversion: 0.3 s and 35 MB of the training process), unless a number does not fit its
    typed array (a step that is not an integer): that column becomes a list, checked by Arrow."""

    def __init__(self, **typecodes: str) -> None:
        self.typed: dict[str, array] = {name: array(code) for name, code in typecodes.items()}  # type: ignore[type-arg]
        self.lists: dict[str, list[object]] = {}
        self.strings: dict[str, _Strings] = {}

    def repeat(self, name: str, value: object, rows: int) -> None:
        col = self.typed.get(name)
        if col is not None and type(value) is int:
            col.extend(array(col.typecode, [value]) * rows)
        elif col is not None or name in self.lists:
            self.extend(name, [value] * rows)
        else:
            self.strings.setdefault(name, _Strings()).repeat(value, rows)  # type: ignore[arg-type]

    def extend(self, name: str, values: Iterable[object]) -> None:
        col = self.typed.get(name)
        if col is None:
            self.lists.setdefault(name, []).extend(values)
            return
        n = len(col)
        try:
            if isinstance(values, array) and values.typecode != col.typecode:
                values = values.tolist()
            col.extend(values)
        except (TypeError, OverflowError):  # a value a typed column cannot hold: a list, checked by Arrow
            del col[n:]
            self.lists[name] = [*col.tolist(), *values]
            del self.typed[name]

    def arrays(self, schema: Foreign, nan_is_null: Sequence[str] = ()) -> dict[str, Foreign]:
        """The Arrow columns (``nan_is_null``: float columns where NaN marks "not measured")."""
        import pyarrow as pa
        import pyarrow.compute as pc

        out = {name: pa.array(values, schema.field(name).type) for name, values in self.lists.items()}
        out.update((name, strings.arrow()) for name, strings in self.strings.items())
        for name, values in self.typed.items():
            column = _buffered(values)
            if name in nan_is_null:
                column = pc.if_else(pc.is_nan(column), pa.nulls(1, pa.float64())[0], column)
            out[name] = column
        return out


class _Strings:
    """A string column as dictionary codes: one code per row, one string per distinct value."""

    def __init__(self) -> None:
        self.codes = array("i")
        self.index: dict[str | None, int] = {}

    def repeat(self, value: str | None, rows: int) -> None:
        code = self.index.setdefault(value, len(self.index))
        self.codes.extend(array("i", [code]) * rows)

    def arrow(self) -> Foreign:
        import pyarrow as pa

        values = list(self.index)
        encoded = [b"" if v is None else v.encode() for v in values]
        offsets = array("i", [0, *itertools.accumulate(map(len, encoded))])
        validity = _bitmap(bytes(v is not None for v in values))
        dictionary = pa.Array.from_buffers(
            pa.string(), len(values), [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
        )
        codes = pa.Array.from_buffers(pa.int32(), len(self.codes), [None, pa.py_buffer(self.codes)])
        return pa.DictionaryArray.from_arrays(codes, dictionary).cast(pa.string())


def _bitmap(present: bytes | bytearray) -> Foreign:
    """An Arrow validity bitmap from one byte (0 or 1) a row (None: every row valid)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if 0 not in present:
        return None
    flags = pa.Array.from_buffers(pa.uint8(), len(present), [None, pa.py_buffer(present)])
    return pc.cast(flags, pa.bool_()).buffers()[1]


class _MetricColumns:
    """One float column per metric name over the metric rows, and which rows hold a value."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[array[float]] = []
        self.present: list[bytearray] = []
        self.rows = 0

    def add(self, names: Sequence[str], values: array[float], rows: int) -> None:
        """A packed run's ``rows`` rows of ``names`` (``values`` row-major)."""
        width, taken = len(names), set()
        for j, name in enumerate(names):
            i = self.index.get(name)
            if i is None:
                i = self.index[name] = len(self.values)
                self.values.append(array("d", bytes(8 * self.rows)))
                self.present.append(bytearray(self.rows))
            if i in taken:
                raise ValueError(f"a metric run names {name!r} twice")
            taken.add(i)
            self.values[i].extend(values[j::width])
            self.present[i] += b"\x01" * rows
        for i in range(len(self.values)):
            if i not in taken:
                self.values[i].frombytes(bytes(8 * rows))
                self.present[i] += bytes(rows)
        self.rows += rows

    def arrays(self) -> dict[str, Foreign]:
        """Each name's column (``m<i>``), null where a row has no value for it."""
        import pyarrow as pa

        out = {}
        for i, (values, present) in enumerate(zip(self.values, self.present, strict=True)):
            column = _buffered(values)
            if 0 in present:  # the validity bitmap is the presence bytes as bits
                column = pa.Array.from_buffers(
                    pa.float64(), self.rows, [_bitmap(present), column.buffers()[1]]
                )
            out[metric_column(i)] = column
        return out


def _buffered(values: array) -> Foreign:  # type: ignore[type-arg]
    """An Arrow int64 or float64 array sharing ``values``' memory (Arrow is little-endian, as the
    hosts are)."""
    import pyarrow as pa

    arrow_type = pa.float64() if values.typecode == "d" else pa.int64()
    if not _LITTLE:
        return pa.array(values, arrow_type)
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def part_schema(names: Sequence[str], metric_rows: int, step_rows: int) -> Foreign:
    """The schema of a part of ``metric_rows`` metric rows of ``names``, then ``step_rows`` step
    ends, then the other records."""
    import pyarrow as pa

    fields = [pa.field(name, getattr(pa, type_name)()) for name, type_name in SCHEMA_FIELDS]
    fields += [pa.field(metric_column(i), pa.float64()) for i in range(len(names))]
    metadata = {
        METRICS_KEY: json.dumps(list(names)).encode(),
        METRIC_ROWS_KEY: str(metric_rows).encode(),
        STEP_ROWS_KEY: str(step_rows).encode(),
    }
    return pa.schema(fields, metadata=metadata)


def fill_table(schema: Foreign, columns: dict[str, Foreign], rows: int) -> Foreign:
    """A table of ``schema`` with ``columns``; the columns a kind does not use are null."""
    import pyarrow as pa

    arrays = [columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def writer_of(out: io.BytesIO, schema: Foreign) -> Foreign:  # a pyarrow ParquetWriter
    """A part's Parquet writer: zstd, dictionaries for the string columns of few values only (on
    the float columns they cost half the writing time and made the part larger); the integer
    columns (segment, step, counts) as deltas and the times split by byte, which zstd packs
    better: a quarter less writing and reading time, and a smaller part."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    encodings = {f.name: "DELTA_BINARY_PACKED" for f in schema if f.type == pa.int64()}
    encodings["t"] = "BYTE_STREAM_SPLIT"
    return pq.ParquetWriter(
        out,
        schema,
        compression="zstd",
        use_dictionary=list(DICTIONARY_COLUMNS),
        column_encoding=encodings,
    )


def to_parquet(segments: list[tuple[int, list[Record]]]) -> bytes:
    """Encode ``[(seq, records), ...]`` as one Parquet file: the metric rows, then the step ends,
    then the other records, each in record order and in row groups of their own."""

    # Per-step rows arrive as packed runs (segment.py): Python works once per run, never per row
    # or value.
    rows = _Columns(seq="q", s="q", t="d")  # one per metric row
    metrics = _MetricColumns()
    st = _Columns(seq="q", s="q", n="q", tok="q", t="d", value="d", w="d")
    other = _Columns(seq="q", t="d")
    anatomy = any(
        rec.get("k") == PACKED_STEPS and "a" in rec for _seq, records in segments for rec in records
    )
    if anatomy:  # (null columns otherwise)
        st.typed.update((name, array("d")) for name in ANATOMY_COLUMNS)
    slices = Slices()
    for seq, records in segments:
        slices.check()
        for rec in records:
            kind = rec.get("k")
            if kind == PACKED_METRICS:
                n = len(rec["s"])
                rows.repeat("seq", seq, n)
                rows.repeat("k", "m", n)
                rows.repeat("p", rec["p"], n)
                rows.repeat("g", json.dumps(rec["g"], sort_keys=True) if rec.get("g") else None, n)
                rows.extend("s", rec["s"])
                rows.extend("t", rec["t"])
                metrics.add(rec["n"], rec["v"], n)
            elif kind == PACKED_STEPS:
                st.repeat("seq", seq, len(rec["s"]))
                st.repeat("k", "st", len(rec["s"]))
                for column, field in _STEP_COLUMNS:
                    st.extend(column, rec[field])
                if anatomy:
                    parts = rec.get("a")
                    unmeasured = array("d", [math.nan]) * len(rec["s"])
                    for j, name in enumerate(ANATOMY_COLUMNS):
                        st.extend(name, parts[j::WIDTH] if parts is not None else unmeasured)
            else:
                other.repeat("seq", seq, 1)
                other.repeat("k", str(kind), 1)
                t = rec.get("t")
                other.extend("t", [float(t[0] if isinstance(t, array) else t or 0.0)])
                other.repeat("rest", encode_line(rec), 1)  # a run of lines: its times in base64

    step_rows = len(st.typed["seq"])
    schema = part_schema(list(metrics.index), metrics.rows, step_rows)
    tables = (
        ({**rows.arrays(schema), **metrics.arrays()}, metrics.rows),
        (st.arrays(schema, nan_is_null=("value", "w", *ANATOMY_COLUMNS)), step_rows),
        (other.arrays(schema), len(other.typed["seq"])),
    )
    out = io.BytesIO()
    with writer_of(out, schema) as writer:
        for columns, n in tables:  # each kind in row groups of its own: read a kind's columns only
            if n:
                writer.write_table(fill_table(schema, columns, n), row_group_size=n)
    return out.getvalue()
