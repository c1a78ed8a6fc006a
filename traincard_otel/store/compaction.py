"""Columnar compaction: many closed JSON-lines segments -> one Parquet part (pyarrow, lazily).

A part ``part-<first>-<last>.parquet`` holds every record of its writer's segments ``first..last``,
in order, one row per metric value (``k == "m"``), per step end (``"st"``), or per other record
(kept whole as JSON in ``rest``). Each row keeps the segment it came from (``seq``), so a reader
that already read some of those segments skips exactly their rows: no duplicates, no gaps, while
segments and parts coexist. Reading a part fills series with whole columns at a time.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

Record = dict[str, Any]

COLUMNS = ("seq", "k", "t", "s", "p", "name", "value", "g", "n", "tok", "w", "rest")


def to_parquet(segments: list[tuple[int, list[Record]]]) -> bytes:
    """Encode ``[(seq, records), ...]`` as one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}

    def row(seq: int, k: str, t: float, **fields: Any) -> None:
        cols["seq"].append(seq)
        cols["k"].append(k)
        cols["t"].append(t)
        for c in COLUMNS[3:]:
            cols[c].append(fields.get(c))

    for seq, records in segments:
        for rec in records:
            kind, t = rec.get("k"), float(rec.get("t") or 0.0)
            if kind == "m":
                tags = json.dumps(rec["g"], sort_keys=True) if rec.get("g") else None
                for name, value in (rec.get("v") or {}).items():
                    v = float(value) if value is not None else math.nan
                    row(seq, "m", t, s=rec.get("s"), p=rec.get("p"), name=name, value=v, g=tags)
            elif kind == "st":
                row(
                    seq,
                    "st",
                    t,
                    s=rec.get("s"),
                    value=rec.get("d"),
                    n=rec.get("n"),
                    tok=rec.get("tok"),
                    w=rec.get("w"),
                )
            else:
                row(seq, str(kind), t, rest=json.dumps(rec, default=str))
    schema = pa.schema(
        [
            ("seq", pa.int64()),
            ("k", pa.string()),
            ("t", pa.float64()),
            ("s", pa.int64()),
            ("p", pa.string()),
            ("name", pa.string()),
            ("value", pa.float64()),
            ("g", pa.string()),
            ("n", pa.int64()),
            ("tok", pa.int64()),
            ("w", pa.float64()),
            ("rest", pa.string()),
        ]
    )
    table = pa.table(cols, schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def read_parquet(data: bytes) -> Any:
    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(data))
