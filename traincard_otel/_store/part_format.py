"""The compacted part's format (Parquet), as both sides know it: its columns, the schema
metadata of its metric columns, and how a part is read back. :mod:`traincard_otel._write.store.compaction`
writes parts; :mod:`traincard_otel._read.load.parts` reads them into a run.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

from .._types import Foreign

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
)

#: Schema metadata of a part with metric columns: the metric names (JSON list, the column of
#: ``names[i]`` is ``m<i>``) and how many rows (the first ones) are metric rows.
METRICS_KEY, METRIC_ROWS_KEY = b"traincard_metrics", b"traincard_metric_rows"

#: String columns of few values, read as dictionaries: no string per row, compared by code.
DICTIONARY_COLUMNS = ("k", "p", "name", "g")


def metric_column(index: int) -> str:
    """The Parquet column of the ``index``-th metric name of a part."""
    return f"m{index}"


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
    other = [name for name, _type in SCHEMA_FIELDS]
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
