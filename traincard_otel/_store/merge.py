"""Tiered compaction: a writer's parts merged into bigger ones, so that a long run's store holds a
bounded number of objects.

A run that flushes every 2 s writes 1 800 segments an hour; compaction turns every
:data:`~.writer.COMPACT_SEGMENTS` of them into a part (:mod:`.compaction`), and those parts are
merged in turn, as a log-structured merge does: every :data:`MERGE_PARTS` parts of one tier become
one part of the next, up to :data:`MAX_MERGED_ROWS` rows. A writer's objects are then at most
``COMPACT_SEGMENTS - 1`` segments, ``MERGE_PARTS - 1`` parts per tier, and one part per
``MAX_MERGED_ROWS`` rows beyond: for a 1M-step run flushing every 200 steps, about ten objects where
there were eighty parts. Each row is rewritten once per tier (three times for that run), on the
writer's thread, one merge per flush at most; what a merge holds in memory is its parts' bytes
and one row group (:data:`ROW_GROUP_ROWS` rows) at a time.

The merged part is written before the parts it holds are deleted, and a reader takes a part that
holds another (same writer, its segments inside) instead of it (:mod:`.reader`), so a merge killed
half-way leaves a store that reads the same. A backend that cannot delete is not merged into:
there a merge would add objects, not remove them.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import NamedTuple

from .._types import Foreign
from .compaction import fill_table, layout_of, metric_column, part_schema, writer_of

MERGE_PARTS = 8  # parts of one tier merged into one of the next
MAX_MERGED_ROWS = 4_000_000  # no merge makes a part of more rows (a part is read and written whole)
ROW_GROUP_ROWS = 262_144  # rows of one kind gathered before they are written as one row group


class Part(NamedTuple):
    """A part this writer wrote: its segments ``first..last``, its rows, and its tier (0: made of
    segments, ``n + 1``: made of parts of tier ``n``)."""

    first: int
    last: int
    rows: int
    tier: int


class Tiers:
    """The parts of one writer that a merge may still take, oldest first."""

    def __init__(self, fan_in: int = MERGE_PARTS, max_rows: int = MAX_MERGED_ROWS) -> None:
        self.fan_in, self.max_rows = fan_in, max_rows
        self.parts: list[Part] = []

    def add(self, part: Part) -> None:
        """A part written: merged later with those before it, unless segments lie between them
        (segments left out of compaction are never covered by a merged part's name)."""
        if self.parts and self.parts[-1].last + 1 != part.first:
            self.parts.clear()
        self.parts.append(part)

    def due(self) -> list[Part] | None:
        """The parts to merge now: the latest :attr:`fan_in`, when they are of one tier and their
        merge stays within :attr:`max_rows`."""
        tail = self.parts[-self.fan_in :]
        if len(tail) < self.fan_in or len({p.tier for p in tail}) != 1:
            return None
        return tail if sum(p.rows for p in tail) <= self.max_rows else None

    def merged(self, taken: list[Part]) -> Part:
        """``taken`` (what :meth:`due` gave) was merged: the part that holds them now."""
        into = Part(taken[0].first, taken[-1].last, sum(p.rows for p in taken), taken[0].tier + 1)
        self.parts[-len(taken) :] = [into]
        return into


def merge_parts(parts: Sequence[bytes]) -> bytes:
    """Parts of one writer, consecutive, as one part: every metric row of each in turn, then every
    step end, then every other record (the metric names of all of them, each in one column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = [pq.ParquetFile(io.BytesIO(data)) for data in parts]
    layouts = [layout_of(f) for f in files]
    for found in layouts:
        if found.groups is None or found.step_rows is None:
            raise ValueError("only parts with the step ends in row groups of their own are merged")
    names = list(dict.fromkeys(name for found in layouts for name in found.names))
    index = {name: i for i, name in enumerate(names)}
    schema = part_schema(names, sum(f.metric_rows for f in layouts), sum(f.step_rows or 0 for f in layouts))
    out = io.BytesIO()
    with writer_of(out, schema) as writer:
        for kind in range(3):  # metric rows, step ends, other records
            pending: list[Foreign] = []
            rows = 0
            for part, found in zip(files, layouts, strict=True):
                assert found.groups is not None
                groups = found.groups[kind]
                if not groups:
                    continue
                table = part.read_row_groups(groups)
                renamed = {metric_column(i): metric_column(index[name]) for i, name in enumerate(found.names)}
                columns = {renamed.get(c, c): table[c] for c in table.column_names}
                pending.append(fill_table(schema, columns, table.num_rows))
                rows += table.num_rows
                if rows >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending), row_group_size=rows)
                    pending, rows = [], 0
            if rows:
                writer.write_table(pa.concat_tables(pending), row_group_size=rows)
    return out.getvalue()
