"""Read a task's store back: every attempt and rank merged into one timeline.

Used by :func:`traincard_otel.load`, the card and the CLI. Segments are immutable, so parsed
segments are cached per store and a live reader only fetches what is new. A segment that cannot
be parsed is skipped and counted, never fatal.
"""

from __future__ import annotations

import gc
import json
import threading

from ..._data.rundata import Record, RunData, Series
from ..._store import layout, segment
from ..._store.backends import Backend
from ..._types import JsonObject
from . import part_columns, part_metrics, profiles
from .columns import rank_series
from .parts import add_kept_records, add_other_rows, add_step_rows, add_table
from .records import add_log_lines, add_metric_columns, add_record, add_step_columns
from .time_order import in_time_order

__all__ = ["RunData", "Series", "StoreReader", "rank_series", "read_store"]

_GC_OFF = threading.Lock()


class StoreReader:
    """Reads a store, then only what is new on each :meth:`read` (segments are immutable).

    The live refresher keeps one for the whole run, so a refresh costs what was written since the
    last one, not the run's length.
    """

    def __init__(self, backend: Backend, source: str | None = None, *, share_columns: bool = False) -> None:
        """``share_columns``: the metric series read from the same parts share one read-only
        column of steps, times, attempts and ranks (:class:`~.columns.Shared`), for a read that
        nothing extends later (a series that grows copies its shared columns first)."""
        self.backend = backend
        self.share_columns = share_columns
        self.data = RunData(source=source or backend.spec)
        self._done: set[str] = set()
        self._corrupt: set[str] = set()
        self._records = 0
        self._seqs: dict[tuple[int, int, str], set[int]] = {}  # segments read, per writer
        self._in_order: dict[str, int] = {}  # system series: points known to be in time order
        self._profiles: dict[str, JsonObject] = {}  # profile captures' rank summaries, by object name

    def _add_parts(self, batch: list[tuple[layout.ObjectName, str]], fetched: dict[str, bytes]) -> None:
        """Parts read one after the other, a run of parts of one format at a time (a store may
        hold parts written before the metric columns)."""
        import itertools

        import pyarrow as pa

        from ..._store.part_format import has_metric_columns

        for columnar, group in itertools.groupby(batch, key=lambda b: has_metric_columns(fetched[b[1]])):
            (self._add_column_parts if columnar else self._add_row_parts)(list(group), fetched)
        # Arrow's allocator keeps what the parts' tables freed for reuse: given back here, it was
        # a third of a long run's peak memory
        pa.default_memory_pool().release_unused()

    def _add_column_parts(
        self, batch: list[tuple[layout.ObjectName, str]], fetched: dict[str, bytes]
    ) -> None:
        """Parts with metric columns: every series' rows gathered from all of them, each series'
        columns then built once (:mod:`.part_columns`), then each part's step ends and other
        records added."""
        from ..._store.part_format import read_columns

        pieces: part_columns.Pieces = {}
        others = []
        for p, name in batch:
            seen = self._seqs.setdefault((p.attempt, p.rank, p.writer), set())
            try:
                names, metric, steps, rest = read_columns(fetched[name], seq=bool(seen))
                self._records += part_columns.collect(names, metric, seen, p.attempt, p.rank, pieces)
            except Exception:  # a corrupt part is skipped and counted, like a corrupt segment
                self._corrupt.add(name)
                self._done.add(name)
                continue
            kept = part_metrics.kept
            others.append((p, name, None if steps is None else kept(steps, seen), kept(rest, seen)))
        part_columns.fill(self.data, pieces, share=self.share_columns)
        for p, name, steps, rest in others:
            if steps is None:  # a part that keeps its step ends among the other records
                add_other_rows(self.data, rest, p.attempt, p.rank)
            else:
                add_step_rows(self.data, steps, p.attempt, p.rank)
                add_kept_records(self.data, rest["rest"], p.attempt, p.rank)
                self._records += int(steps.num_rows)
            self._records += int(rest.num_rows)
            self._seqs[(p.attempt, p.rank, p.writer)].update(range(p.seq, p.last + 1))
            self._done.add(name)

    def _add_row_parts(self, batch: list[tuple[layout.ObjectName, str]], fetched: dict[str, bytes]) -> None:
        """Parts of one row per metric value: every metric series grown once for all of them
        (:mod:`.part_metrics`), then each part added."""
        from ..._store.part_format import read_parquet

        counts: dict[str, int] = {}
        order: list[tuple[str, str, dict[str, str] | None]] = []
        for p, name in batch:
            seen = self._seqs.get((p.attempt, p.rank, p.writer), set())
            columns = [*part_metrics.COUNT_COLUMNS, *(["seq"] if seen else [])]
            try:
                part_metrics.count(
                    part_metrics.kept(read_parquet(fetched[name], columns), seen), counts, order
                )
            except Exception:  # an unreadable part is counted as corrupt when it is added
                continue
        slots = part_metrics.reserve(self.data, counts, order)
        ends = {key: slots[key] + counts[key] for key in slots}
        for p, name in batch:
            self._add_part(p, name, fetched[name], slots)
        part_metrics.release(self.data, slots, ends)

    def _add_part(self, p: layout.ObjectName, name: str, raw: bytes, slots: part_metrics.Slots) -> None:
        from ..._store.part_format import read_parquet

        seen = self._seqs.setdefault((p.attempt, p.rank, p.writer), set())
        try:
            table = read_parquet(raw)
            missing = set(part_metrics.ROW_COLUMNS) - set(table.column_names)
            if missing:
                raise ValueError(f"a part of one row per value without {sorted(missing)}")
        except Exception:  # a corrupt part is skipped and counted, like a corrupt segment
            self._corrupt.add(name)
            self._done.add(name)
            return
        self._records += add_table(self.data, table, seen, p.attempt, p.rank, slots)
        seen.update(range(p.seq, p.last + 1))
        self._done.add(name)

    def read(self) -> RunData:
        # Millions of small objects are created and none of them form cycles: the cyclic GC would
        # only rescan them again and again (it made a 1M-step read several times slower).
        # One read at a time in a process (the card's refresher and the metric gauges may both
        # read): two interleaved reads could leave the GC off for good.
        with _GC_OFF:
            enabled = gc.isenabled()
            gc.disable()
            try:
                return self._read()
            finally:
                if enabled:
                    gc.enable()

    def _read(self) -> RunData:
        data = self.data
        parsed = sorted((p, n) for n in self.backend.list() if (p := layout.parse(n)) is not None)
        parts = [(p, n) for p, n in parsed if p.kind == "part" and n not in self._done]
        for p, n in parts:  # a part of segments this reader already read adds nothing: not fetched
            if self._seqs.get((p.attempt, p.rank, p.writer), set()).issuperset(range(p.seq, p.last + 1)):
                self._done.add(n)
        parts = _outermost([(p, n) for p, n in parts if n not in self._done])
        covered = {(p.attempt, p.rank, p.writer, seq) for p, _n in parts for seq in range(p.seq, p.last + 1)}
        new = [
            n
            for p, n in parsed
            if p.kind == "segment"
            and n not in self._done
            and (p.attempt, p.rank, p.writer, p.seq) not in covered
        ]
        fetched = self.backend.read_many([n for _p, n in parts] + new) if parts or new else {}
        batch: list[tuple[layout.ObjectName, str]] = []  # parts in a row, read together
        for p, name in parsed:
            if name not in fetched:
                continue
            if p.kind == "part":
                batch.append((p, name))
                continue
            self._add_parts(batch, fetched)
            batch = []
            records, corrupt = segment.decode(fetched[name], columns_kept=True)
            if corrupt:
                self._corrupt.add(name)
            for rec in records:
                kind = rec.get("k")
                if kind == segment.PACKED_METRICS:  # packed runs: whole columns at once
                    self._records += add_metric_columns(data, rec, p.attempt, p.rank) - 1
                elif kind == segment.PACKED_STEPS:
                    self._records += add_step_columns(data, rec, p.attempt, p.rank) - 1
                elif kind == segment.PACKED_LINES:
                    self._records += add_log_lines(data, rec, p.attempt, p.rank) - 1
                else:
                    add_record(data, rec, p.attempt, p.rank)
            self._records += len(records)
            self._done.add(name)
            self._seqs.setdefault((p.attempt, p.rank, p.writer), set()).add(p.seq)
        self._add_parts(batch, fetched)
        stats: JsonObject = {
            "segments": len(self._done),
            "corrupt_segments": len(self._corrupt),
            "corrupt_names": sorted(self._corrupt),
            "records": self._records,
            "dropped": {},
        }
        for key, series in data.system.items():
            data.system[key] = ordered = in_time_order(series, self._in_order.get(key, 0))
            self._in_order[key] = len(ordered)
        data.states = self._states([n for p, n in parsed if p.kind == "state"], stats)
        self._read_profiles([n for p, n in parsed if p.kind == "profile" and n not in self._profiles])
        data.profiles = profiles.captures(self._profiles, profiles.location(self.backend, "").rstrip("/"))
        data.stats = stats
        return data

    def _read_profiles(self, names: list[str]) -> None:
        """Rank summaries of profile captures not read yet (immutable once written)."""
        if not names:
            return
        for name, raw in self.backend.read_many(names).items():
            found = profiles.rank_summary(raw, self.backend)
            if found is not None:
                self._profiles[name] = found

    def _states(self, names: list[str], stats: JsonObject) -> list[Record]:
        states = []
        for name, raw in self.backend.read_many(names).items():
            try:
                state = json.loads(raw)
            except ValueError:
                stats["corrupt_segments"] += 1
                stats["corrupt_names"].append(name)
                continue
            states.append(state)
            dropped = stats["dropped"]
            for reason, n in (state.get("dropped") or {}).items():
                dropped[reason] = dropped.get(reason, 0) + int(n)
            if state.get("hot_path_overflow"):
                dropped["buffer_full"] = dropped.get("buffer_full", 0) + int(state["hot_path_overflow"])
        return states


def _outermost(parts: list[tuple[layout.ObjectName, str]]) -> list[tuple[layout.ObjectName, str]]:
    """``parts`` without those inside another one of the same writer: a merge writes the part of
    several before it deletes them (:mod:`traincard_otel._write.store.merge`), and a reader may list both."""
    reach: dict[tuple[int, int, str], int] = {}
    inside = set()
    for p, name in sorted(
        parts, key=lambda pn: (pn[0].attempt, pn[0].rank, pn[0].writer, pn[0].seq, -pn[0].last)
    ):
        key = (p.attempt, p.rank, p.writer)
        if p.last <= reach.get(key, 0):
            inside.add(name)
        else:
            reach[key] = p.last
    return [(p, name) for p, name in parts if name not in inside]


def read_store(backend: Backend, source: str | None = None) -> RunData:
    """Read and merge everything under ``backend`` (once: the series share their columns)."""
    return StoreReader(backend, source, share_columns=True).read()
