"""Tiered compaction: a writer's parts merged into bigger ones, so that a long run's store holds a
bounded number of objects.

A run that flushes every 2 s writes 1 800 segments an hour; compaction turns every
:data:`~.writer.COMPACT_SEGMENTS` of them into a part (:mod:`.compaction`), and those parts are
merged in turn, as a log-structured merge does: every :data:`MERGE_PARTS` parts of one tier become
one part of the next, up to :data:`MAX_MERGED_ROWS` rows. A writer's objects are then at most
``COMPACT_SEGMENTS - 1`` segments, ``MERGE_PARTS - 1`` parts per tier, and one part per
``MAX_MERGED_ROWS`` rows beyond: for a 1M-step run flushing every 200 steps, about ten objects where
there were eighty parts. Each row is rewritten once per tier (three times for that run), on a
thread of the writer's own (:class:`Merger`), so that segments are written every flush while a
merge runs (a kill loses no more than it would without merges); what a merge holds in memory is
its parts' bytes and one row group (:data:`ROW_GROUP_ROWS` rows) at a time.

The merged part is written before the parts it holds are deleted, and a reader takes a part that
holds another (same writer, its segments inside) instead of it
(:mod:`traincard_otel._read.load.reader`), so a merge killed half-way leaves a store that reads the
same. A backend that cannot delete is not merged into: there a merge would add objects, not remove
them.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..._safety import internal_error
from ..._store.backends import Backend
from ..._store.part_format import layout_of, metric_column
from ..._types import Foreign
from .compaction import fill_table, part_schema, writer_of

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
        """The parts to merge now: the earliest :attr:`fan_in` in a row of one tier whose merge
        stays within :attr:`max_rows`."""
        for at in range(len(self.parts) - self.fan_in + 1):
            run = self.parts[at : at + self.fan_in]
            if len({p.tier for p in run}) == 1 and sum(p.rows for p in run) <= self.max_rows:
                return run
        return None

    def merged(self, taken: list[Part]) -> Part:
        """``taken`` (what :meth:`due` gave) was merged: the part that holds them now (in their
        place, unless a gap dropped them meanwhile)."""
        into = Part(taken[0].first, taken[-1].last, sum(p.rows for p in taken), taken[0].tier + 1)
        for at in range(len(self.parts) - len(taken) + 1):
            if self.parts[at : at + len(taken)] == taken:
                self.parts[at : at + len(taken)] = [into]
                break
        return into


class Merger:
    """Merges one writer's parts (:class:`Tiers`) on a thread of its own, one merge at a time.

    ``name`` gives a part's object name from its first and last segment; ``failed`` is told of a
    backend call that failed (the merge is tried again after the next part)."""

    def __init__(
        self, backend: Backend, name: Callable[[int, int], str], failed: Callable[[Exception], None]
    ):
        self.backend, self._name, self._failed = backend, name, failed
        self.tiers = Tiers()
        self.merged = 0  # merges done
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None

    def add(self, part: Part) -> None:
        """A part was written: merged with others when its tier is full."""
        if getattr(self.backend, "delete", None) is None:
            return  # a merge would add an object, not remove any
        with self._lock:
            self.tiers.add(part)
            if self.tiers.due() is None:
                return
            self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="traincard-store-merge", daemon=True)
                self._thread.start()
        self._wake.set()

    def wait(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` for the merges due to be done; whether they are."""
        return self._idle.wait(timeout_s)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._merge_one():
                pass
            with self._lock:
                if not self._wake.is_set():  # (a part added meanwhile: another turn)
                    self._idle.set()

    def _merge_one(self) -> bool:
        """Merge the parts due, if any; whether it did (or should try again)."""
        with self._lock:
            taken = self.tiers.due()
        if taken is None:
            return False
        names = [self._name(p.first, p.last) for p in taken]
        try:
            fetched = self.backend.read_many(names)
            payload = merge_parts([fetched[name] for name in names])
        except Exception as exc:  # those parts stay as they are; later ones are merged apart from them
            with self._lock:
                self.tiers.parts.clear()
            internal_error("store part merge", exc)
            return False
        try:
            self.backend.write(self._name(taken[0].first, taken[-1].last), payload)
            with self._lock:
                self.tiers.merged(taken)
                self.merged += 1
            self.backend.delete(names)  # type: ignore[attr-defined]  # (checked in add())
        except Exception as exc:  # tried again after the next part; leftovers are read as nested
            self._failed(exc)
            return False
        return True


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
