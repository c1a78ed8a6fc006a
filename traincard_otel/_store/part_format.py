"""The compacted part's format (Parquet), as both sides know it: its columns, the schema
metadata that says where each kind of row is, and how a part is read back.
:mod:`traincard_otel._write.store.compaction` writes parts and
:mod:`traincard_otel._write.store.merge` merges them; :mod:`traincard_otel._read.load.parts` reads
them into a run.

A part keeps each kind of row in row groups of its own: the metric rows (one float column per
metric name), then the step ends (with their anatomy, one float column per part: ``a_data``,
``a_forward``, ...; null where not measured), then every other record. Parts written before the
step ends had row groups of their own (no ``traincard_step_rows``) keep step ends among the other
records; parts written before the anatomy have no ``a_*`` columns.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import NamedTuple

from .._schema import STEP_PARTS
from .._types import Foreign

#: The step anatomy's columns of a step end, one per ``STEP_PARTS`` in its order.
ANATOMY_COLUMNS = tuple(f"a_{part}" for part in STEP_PARTS)

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
    *((name, "float64") for name in ANATOMY_COLUMNS),
)

#: Schema metadata of a part with metric columns: the metric names (JSON list, the column of
#: ``names[i]`` is ``m<i>``), how many rows (the first ones) are metric rows, and how many rows
#: after them are step ends (parts without this last key keep step ends among the other records).
METRICS_KEY, METRIC_ROWS_KEY = b"traincard_metrics", b"traincard_metric_rows"
STEP_ROWS_KEY = b"traincard_step_rows"

#: String columns of few values, read as dictionaries: no string per row, compared by code.
DICTIONARY_COLUMNS = ("k", "p", "name", "g")

#: The columns of a step end (the duration is the row's ``value``).
STEP_FIELDS = ("s", "t", "value", "w", "n", "tok")


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


class Layout(NamedTuple):
    """Where the kinds of rows of a part with metric columns are: its metric names and row
    counts, and the row groups of its metric rows, of its step ends (None: they share the other
    records' row groups, as in parts written before) and of its other records; ``groups`` is None
    when a kind's rows do not end with a row group."""

    names: list[str]
    metric_rows: int
    step_rows: int | None
    groups: tuple[range, range | None, range] | None


def layout_of(part: Foreign) -> Layout:  # part: a pyarrow ParquetFile
    """The layout of a part with metric columns, from its footer."""
    metadata = part.schema_arrow.metadata or {}
    names: list[str] = json.loads(metadata[METRICS_KEY])
    metric_rows = int(metadata[METRIC_ROWS_KEY])
    step_rows = int(metadata[STEP_ROWS_KEY]) if STEP_ROWS_KEY in metadata else None
    ends = [0]  # the rows before each row group, and all of them
    for i in range(part.metadata.num_row_groups):
        ends.append(ends[-1] + part.metadata.row_group(i).num_rows)
    every = range(part.metadata.num_row_groups)
    try:
        first = ends.index(metric_rows)
        second = ends.index(metric_rows + (step_rows or 0), first)
    except ValueError:
        return Layout(names, metric_rows, step_rows, None)
    steps = every[first:second] if step_rows is not None else None
    return Layout(names, metric_rows, step_rows, (every[:first], steps, every[second:]))


def read_columns(data: bytes, seq: bool) -> tuple[list[str], Foreign, Foreign | None, Foreign]:
    """A part with metric columns: its metric names, its metric rows (``s``, ``t``, ``g``, each
    name's column), its step ends (:data:`STEP_FIELDS` and the :data:`ANATOMY_COLUMNS` it has; None
    for a part that keeps them among the other records) and its other records (``rest``; every
    column for a part that keeps step ends among them); each with ``seq`` when asked. Only those
    columns are read."""
    import pyarrow.parquet as pq

    part = pq.ParquetFile(io.BytesIO(data), read_dictionary=["k", "p", "g"])
    found = layout_of(part)
    extra = ["seq"] if seq else []
    have = set(part.schema_arrow.names)  # a part written before the anatomy has no a_* columns
    wanted = ["s", "t", "g", *(metric_column(i) for i in range(len(found.names))), *extra]
    step_columns = [*STEP_FIELDS, *(c for c in ANATOMY_COLUMNS if c in have), *extra]
    other = (
        ["rest", *extra]
        if found.step_rows is not None
        else [name for name, _type in SCHEMA_FIELDS if name in have]
    )
    metric_rows, step_rows = found.metric_rows, found.step_rows
    if found.groups is None:  # a kind's rows do not end with a row group: every row read, then split
        whole = part.read()
        after = metric_rows + (step_rows or 0)
        steps = None if step_rows is None else whole.select(step_columns).slice(metric_rows, step_rows)
        return (
            found.names,
            whole.select(wanted).slice(0, metric_rows),
            steps,
            whole.select(other).slice(after),
        )
    metric_groups, step_groups, other_groups = found.groups
    steps = None if step_groups is None else part.read_row_groups(step_groups, step_columns)
    return (
        found.names,
        part.read_row_groups(metric_groups, wanted),
        steps,
        part.read_row_groups(other_groups, other),
    )


def has_metric_columns(data: bytes) -> bool:
    """Whether a part holds metric columns (its footer only; False for one it cannot parse, left
    to the reader of parts of one row per value to count as corrupt)."""
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(io.BytesIO(data)).schema_arrow.metadata or {}
    except Exception:
        return False
    return METRICS_KEY in metadata
