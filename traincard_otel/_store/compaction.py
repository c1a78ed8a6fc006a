"""Columnar compaction: many closed JSON-lines segments -> one Parquet part (pyarrow, lazily).

A part ``part-<first>-<last>.parquet`` holds every record of its writer's segments ``first..last``,
each kind in record order: first the metric rows (``k == "m"``), one row per reported step with
one float column per metric name (``m0``, ``m1``, ...: null where that row has no value for it;
the names are the schema's ``traincard_metrics`` metadata), then the step ends (``"st"``), then
every other record (kept whole as JSON in ``rest``). Step ends that carry their anatomy have one
float column per part (``a_data``, ``a_forward``, ...: null where not measured). Reading a metric
series is a column read.
Each row keeps the segment it came from (``seq``), so a reader that already read some of those
segments skips exactly their rows: no duplicates, no gaps, while segments and parts coexist.

Parts written before the metric columns (one row per metric value, its name in ``name``, no
``traincard_metrics`` metadata) stay readable (:mod:`.part_metrics`).
"""

from __future__ import annotations

import io
import json
import math
import sys
from array import array
from collections.abc import Iterable, Sequence

from .._schema import STEP_PARTS
from .._types import Foreign
from .segment import PACKED_METRICS, PACKED_STEPS, WIDTH, Record

SCHEMA_FIELDS = (
    ("seq", "int64"),
    ("k", "string"),
    ("t", "float64"),
    ("s", "int64"),
    ("p", "string"),
    ("g", "string"),
    ("n", "int64"),
    ("tok", "int64"),
    ("value", "float64"),
    ("w", "float64"),
    ("rest", "string"),
    *((f"a_{part}", "float64") for part in STEP_PARTS),
)

#: Schema metadata of a part with metric columns: the metric names (JSON list, the column of
#: ``names[i]`` is ``m<i>``) and how many rows (the first ones) are metric rows.
METRICS_KEY, METRIC_ROWS_KEY = b"traincard_metrics", b"traincard_metric_rows"

#: String columns of few values, read as dictionaries: no string per row, compared by code.
DICTIONARY_COLUMNS = ("k", "p", "name", "g")


def metric_column(index: int) -> str:
    """The Parquet column of the ``index``-th metric name of a part."""
    return f"m{index}"


# Parquet column <- packed step run field (the duration is the step row's ``value``).
_STEP_COLUMNS = (("s", "s"), ("n", "n"), ("tok", "tok"), ("t", "t"), ("value", "d"), ("w", "w"))


class _Columns:
    """The per-row columns of one kind, extended a whole packed run at a time."""

    def __init__(self, *names: str) -> None:
        self.lists: dict[str, list[object]] = {name: [] for name in names}
        self.floats: dict[str, array[float]] = {}

    def repeat(self, name: str, value: object, rows: int) -> None:
        self.lists[name] += [value] * rows

    def extend(self, name: str, values: Iterable[object]) -> None:
        if isinstance(values, array):
            self.floats.setdefault(name, array("d")).extend(values)
        else:
            self.lists[name].extend(values)

    def arrays(self, schema: Foreign) -> dict[str, Foreign]:  # pyarrow's schema and arrays
        import pyarrow as pa
        import pyarrow.compute as pc

        out = {name: pa.array(values, schema.field(name).type) for name, values in self.lists.items()}
        for name, values in self.floats.items():  # NaN marks "not measured": null in the part
            column = _float64(values)
            out[name] = pc.if_else(pc.is_nan(column), pa.nulls(1, pa.float64())[0], column)
        return out


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
        import pyarrow.compute as pc

        out = {}
        for i, (values, present) in enumerate(zip(self.values, self.present, strict=True)):
            column = _float64(values)
            if 0 in present:  # the validity bitmap is the presence bytes as bits
                bits = pc.cast(
                    pa.Array.from_buffers(pa.uint8(), self.rows, [None, pa.py_buffer(present)]), pa.bool_()
                )
                column = pa.Array.from_buffers(
                    pa.float64(), self.rows, [bits.buffers()[1], column.buffers()[1]]
                )
            out[metric_column(i)] = column
        return out


def _float64(values: array[float]) -> Foreign:
    """An Arrow float64 array sharing ``values``' memory (Arrow is little-endian, as the hosts are)."""
    import pyarrow as pa

    if sys.byteorder != "little":
        return pa.array(values, pa.float64())
    return pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)])


def to_parquet(segments: list[tuple[int, list[Record]]]) -> bytes:
    """Encode ``[(seq, records), ...]`` as one Parquet file: the metric rows, then the step ends,
    then the other records, each in record order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Per-step rows arrive as packed runs (segment.py): Python works once per run, never per row
    # or value.
    rows = _Columns("seq", "s", "p", "g")  # one per metric row
    t = array("d")
    metrics = _MetricColumns()
    st = _Columns("seq", "s", "n", "tok")
    other = _Columns("seq", "k", "t", "rest")
    anatomy = any(
        rec.get("k") == PACKED_STEPS and "a" in rec for _seq, records in segments for rec in records
    )
    for seq, records in segments:
        for rec in records:
            kind = rec.get("k")
            if kind == PACKED_METRICS:
                n = len(rec["s"])
                rows.repeat("seq", seq, n)
                rows.repeat("p", rec["p"], n)
                rows.repeat("g", json.dumps(rec["g"], sort_keys=True) if rec.get("g") else None, n)
                rows.extend("s", rec["s"])
                t.extend(rec["t"])
                metrics.add(rec["n"], rec["v"], n)
            elif kind == PACKED_STEPS:
                st.repeat("seq", seq, len(rec["s"]))
                for column, field in _STEP_COLUMNS:
                    st.extend(column, rec[field])
                if anatomy:
                    parts = rec.get("a")
                    unmeasured = array("d", [math.nan]) * len(rec["s"])
                    for j, part in enumerate(STEP_PARTS):
                        st.extend(f"a_{part}", parts[j::WIDTH] if parts is not None else unmeasured)
            else:
                other.repeat("seq", seq, 1)
                other.extend("k", [str(kind)])
                other.extend("t", [float(rec.get("t") or 0.0)])
                other.extend("rest", [json.dumps(rec, default=str)])

    names = list(metrics.index)
    fields = [pa.field(name, getattr(pa, type_name)()) for name, type_name in SCHEMA_FIELDS]
    fields += [pa.field(metric_column(i), pa.float64()) for i in range(len(names))]
    metadata = {METRICS_KEY: json.dumps(names).encode(), METRIC_ROWS_KEY: str(metrics.rows).encode()}
    schema = pa.schema(fields, metadata=metadata)

    def table(columns: dict[str, Foreign], size: int) -> Foreign:
        """``size`` rows; the columns a kind does not use are null."""
        arrays = [columns[f.name] if f.name in columns else pa.nulls(size, f.type) for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)

    metric_table = table(
        {**rows.arrays(schema), "t": _float64(t), "k": pa.repeat("m", metrics.rows), **metrics.arrays()},
        metrics.rows,
    )
    steps = st.arrays(schema)
    step_table = table({**steps, "k": pa.repeat("st", len(steps["seq"]))}, len(steps["seq"]))
    others = other.arrays(schema)
    out = io.BytesIO()
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        # the metric rows are row groups of their own: a reader reads their columns only
        if metrics.rows:
            writer.write_table(metric_table, row_group_size=metrics.rows)
        rest = pa.concat_tables([step_table, table(others, len(others["seq"]))])
        if rest.num_rows:
            writer.write_table(rest, row_group_size=rest.num_rows)
    return out.getvalue()


def read_parquet(data: bytes, columns: Sequence[str] | None = None) -> Foreign:  # a pyarrow Table
    """A part's rows (``columns`` only, when given)."""
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table imports pyarrow.dataset and pandas (0.3 s a process)
    have = set(pq.ParquetFile(io.BytesIO(data)).schema_arrow.names)
    dictionaries = [c for c in DICTIONARY_COLUMNS if c in have]
    return pq.ParquetFile(io.BytesIO(data), read_dictionary=dictionaries).read(columns)


def read_columns(data: bytes, seq: bool) -> tuple[list[str], Foreign, Foreign]:
    """A part with metric columns: its metric names, its metric rows (``s``, ``t``, ``g``, each
    name's column, and ``seq`` when asked) and its other rows (every column but the metric ones)."""
    import pyarrow.parquet as pq

    part = pq.ParquetFile(io.BytesIO(data), read_dictionary=["k", "p", "g"])
    metadata = part.schema_arrow.metadata or {}
    names: list[str] = json.loads(metadata[METRICS_KEY])
    rows, groups, left = int(metadata[METRIC_ROWS_KEY]), 0, int(metadata[METRIC_ROWS_KEY])
    while left > 0 and groups < part.metadata.num_row_groups:
        left -= part.metadata.row_group(groups).num_rows
        groups += 1
    columns = [metric_column(i) for i in range(len(names))]
    wanted = ["s", "t", "g", *columns, *(["seq"] if seq else [])]
    have = set(part.schema_arrow.names)  # a part written before the anatomy has no a_* columns
    other = [name for name, _type in SCHEMA_FIELDS if name in have]
    if left:  # metric rows that do not end with a row group: every row read, then split
        whole = part.read()
        return names, whole.select(wanted).slice(0, rows), whole.select(other).slice(rows)
    everything = range(part.metadata.num_row_groups)
    metric = part.read_row_groups(everything[:groups], wanted)
    rest = part.read_row_groups(everything[groups:], other)
    return names, metric, rest


def has_metric_columns(data: bytes) -> bool:
    """Whether a part holds metric columns (its footer only; False for one it cannot parse, left
    to the reader of parts of one row per value to count as corrupt)."""
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(io.BytesIO(data)).schema_arrow.metadata or {}
    except Exception:
        return False
    return METRICS_KEY in metadata
