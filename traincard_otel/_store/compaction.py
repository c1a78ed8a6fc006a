"""Columnar compaction: many closed JSON-lines segments -> one Parquet part (pyarrow, lazily).

A part ``part-<first>-<last>.parquet`` holds every record of its writer's segments ``first..last``:
one row per metric value (``k == "m"``), per step end (``"st"``), or per other record (kept whole
as JSON in ``rest``), each kind in record order. Each row keeps the segment it came from (``seq``),
so a reader that already read some of those segments skips exactly their rows: no duplicates, no
gaps, while segments and parts coexist. Reading a part fills series with whole columns at a time.
"""

from __future__ import annotations

import io
import json
import sys
from array import array
from collections.abc import Iterable, Sequence

from .._types import Foreign
from .segment import PACKED_METRICS, PACKED_STEPS, Record

SCHEMA_FIELDS = (
    ("seq", "int64"),
    ("k", "string"),
    ("t", "float64"),
    ("s", "int64"),
    ("p", "string"),
    ("name", "string"),
    ("value", "float64"),
    ("g", "string"),
    ("n", "int64"),
    ("tok", "int64"),
    ("w", "float64"),
    ("rest", "string"),
)


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
            out[name] = pc.if_else(pc.is_nan(column), pa.scalar(None, pa.float64()), column)
        return out


def _float64(values: array[float]) -> Foreign:
    """An Arrow float64 array sharing ``values``' memory (Arrow is little-endian, as the hosts are)."""
    import pyarrow as pa

    if sys.byteorder != "little":
        return pa.array(values, pa.float64())
    return pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)])


def to_parquet(segments: list[tuple[int, list[Record]]]) -> bytes:
    """Encode ``[(seq, records), ...]`` as one Parquet file: the metric values, then the step
    ends, then the other records, each in record order."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = pa.schema([(name, getattr(pa, type_name)()) for name, type_name in SCHEMA_FIELDS])
    # Per-step rows arrive as packed runs (segment.py): Python works once per run, never per row
    # or value; a metric row's fields are repeated over its values by pyarrow.
    rows = _Columns("seq", "s", "p", "g")  # one per metric row
    name_ids: dict[str, int] = {}
    name_idx = array("i")  # per value: its name's index in name_ids
    values, t = array("d"), array("d")
    ends = array("q", [0])  # offsets of each metric row's values
    st = _Columns("seq", "s", "n", "tok")
    other = _Columns("seq", "k", "t", "rest")
    for seq, records in segments:
        for rec in records:
            kind = rec.get("k")
            if kind == PACKED_METRICS:
                n, width = len(rec["s"]), len(rec["n"])
                rows.repeat("seq", seq, n)
                rows.repeat("p", rec["p"], n)
                rows.repeat("g", json.dumps(rec["g"], sort_keys=True) if rec.get("g") else None, n)
                rows.extend("s", rec["s"])
                t.extend(rec["t"])
                name_idx.extend(array("i", [name_ids.setdefault(x, len(name_ids)) for x in rec["n"]]) * n)
                values.extend(rec["v"])
                ends.extend(range(ends[-1] + width, ends[-1] + width * n + 1, width))
            elif kind == PACKED_STEPS:
                st.repeat("seq", seq, len(rec["s"]))
                for column, field in _STEP_COLUMNS:
                    st.extend(column, rec[field])
            else:
                other.repeat("seq", seq, 1)
                other.extend("k", [str(kind)])
                other.extend("t", [float(rec.get("t") or 0.0)])
                other.extend("rest", [json.dumps(rec, default=str)])

    def table(columns: dict[str, Foreign], size: int) -> Foreign:
        """``size`` rows; the columns a kind does not use are null."""
        arrays = [columns[f.name] if f.name in columns else pa.nulls(size, f.type) for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)

    per_row = {**rows.arrays(schema), "t": _float64(t)}
    grouped = pa.LargeListArray.from_arrays(pa.array(ends, pa.int64()), pa.array(name_idx, pa.int32()))
    owner = pc.list_parent_indices(grouped)  # for each value, the index of its row
    size = len(values)
    metric_table = table(
        {
            **{name: column.take(owner) for name, column in per_row.items()},
            "k": pa.repeat("m", size),
            "name": pa.array(list(name_ids), pa.string()).take(grouped.flatten()),
            "value": _float64(values),
        },
        size,
    )
    steps = st.arrays(schema)
    step_table = table({**steps, "k": pa.repeat("st", len(steps["seq"]))}, len(steps["seq"]))
    others = other.arrays(schema)
    out = io.BytesIO()
    pq.write_table(
        pa.concat_tables([metric_table, step_table, table(others, len(others["seq"]))]),
        out,
        compression="zstd",
    )
    return out.getvalue()


def read_parquet(data: bytes, columns: Sequence[str] | None = None) -> Foreign:  # a pyarrow Table
    """A part's rows (``columns`` only, when given)."""
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table imports pyarrow.dataset and pandas (0.3 s a process)
    # String columns of few values read as dictionaries: no string per row, compared by code
    return pq.ParquetFile(io.BytesIO(data), read_dictionary=["k", "p", "name", "g"]).read(columns)
