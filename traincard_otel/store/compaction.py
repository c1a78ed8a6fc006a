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
from typing import Any

Record = dict[str, Any]

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


def to_parquet(segments: list[tuple[int, list[Record]]]) -> bytes:
    """Encode ``[(seq, records), ...]`` as one Parquet file: the metric values, then the step
    ends, then the other records, each in record order."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    schema = pa.schema([(name, getattr(pa, type_name)()) for name, type_name in SCHEMA_FIELDS])
    # Python does one step per record, not per value (per value, compaction cost more than all
    # the writer's other work per step); pyarrow repeats each record's fields over its values.
    m: dict[str, list[Any]] = {c: [] for c in ("seq", "t", "s", "p", "g", "name", "value")}
    ends = [0]  # offsets of each metric record's values in m["name"] / m["value"]
    st: dict[str, list[Any]] = {c: [] for c in ("seq", "t", "s", "value", "n", "tok", "w")}
    other: dict[str, list[Any]] = {c: [] for c in ("seq", "k", "t", "rest")}
    for seq, records in segments:
        for rec in records:
            kind, t = rec.get("k"), float(rec.get("t") or 0.0)
            if kind == "m":
                values = rec.get("v") or {}
                m["seq"].append(seq)
                m["t"].append(t)
                m["s"].append(rec.get("s"))
                m["p"].append(rec.get("p"))
                m["g"].append(json.dumps(rec["g"], sort_keys=True) if rec.get("g") else None)
                m["name"].extend(values)
                m["value"].extend(values.values())
                ends.append(len(m["name"]))
            elif kind == "st":
                st["seq"].append(seq)
                st["t"].append(t)
                st["value"].append(rec.get("d"))
                for field in ("s", "n", "tok", "w"):
                    st[field].append(rec.get(field))
            else:
                other["seq"].append(seq)
                other["k"].append(str(kind))
                other["t"].append(t)
                other["rest"].append(json.dumps(rec, default=str))

    def table(columns: dict[str, Any], size: int) -> Any:
        """``size`` rows; the columns a kind does not use are null."""
        arrays = []
        for f in schema:
            values = columns.get(f.name)
            if values is None:
                values = pa.nulls(size, f.type)
            arrays.append(values if isinstance(values, pa.Array) else pa.array(values, f.type))
        return pa.Table.from_arrays(arrays, schema=schema)

    names = pa.ListArray.from_arrays(pa.array(ends, pa.int32()), pa.array(m["name"], pa.string()))
    owner = pc.list_parent_indices(names)  # for each value, the index of its record
    per_value = {c: pa.array(m[c], schema.field(c).type).take(owner) for c in ("seq", "t", "s", "p", "g")}
    size = len(m["value"])
    metric_table = table(
        {**per_value, "k": pa.repeat("m", size), "name": names.flatten(), "value": m["value"]}, size
    )
    step_table = table({**st, "k": pa.repeat("st", len(st["seq"]))}, len(st["seq"]))
    out = io.BytesIO()
    pq.write_table(
        pa.concat_tables([metric_table, step_table, table(other, len(other["seq"]))]),
        out,
        compression="zstd",
    )
    return out.getvalue()


def read_parquet(data: bytes) -> Any:
    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(data))
