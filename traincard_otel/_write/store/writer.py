"""One process's store writer: buffers records, writes an immutable segment per flush.

Exporters call :meth:`StoreWriter.add` from SDK or converter threads; only the writer's own thread
touches storage. A failed write keeps its segment for the next attempt (same name, so a retry can
never duplicate data), and the writer backs off on the schedule of :mod:`.retry` until the store
answers again; beyond ``max_pending`` records, new records are dropped and counted, and the counts
and :attr:`StoreWriter.store_health` are written to ``state.json`` for the card and
:func:`traincard_otel.load`. The process's summary (:meth:`StoreWriter.set_summary`), when it is
given one, is written after the state, as an object of its own. Limits and counts are in rows: a
packed run of per-step rows (:mod:`traincard_otel._store.segment`) counts as its length. A forked
child's copy of a writer writes nothing: its buffer and names (writer id, next segment number) are
the parent's. Its parts are merged into bigger ones on a thread of its own (:mod:`.merge`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping
from typing import TypedDict

from ..._safety import internal_error
from ..._store import layout, segment
from ..._store.backends import Backend
from ..._store.segment import Record
from ..._types import JsonObject, JsonValue
from .merge import Merger, Part
from .retry import Backoff

logger = logging.getLogger("traincard_otel")


COMPACT_SEGMENTS = 64  # closed segments per Parquet part...
COMPACT_RECORDS = 100_000  # ...or fewer, once they hold this many rows (bounds the writer's memory)


class StoreHealthSection(TypedDict):
    """How writing to the store goes (``store_health`` in the state file)."""

    write_errors: int
    last_error: str | None
    last_error_at: float | None
    pending_rows: int
    retrying: bool


class StoreWriter:
    """Buffers records and flushes them to ``backend`` every ``flush_interval_s`` seconds."""

    def __init__(
        self,
        backend: Backend,
        *,
        attempt: int,
        rank: int,
        flush_interval_s: float = 2.0,
        max_pending: int = 200_000,
    ) -> None:
        self.backend = backend
        self.pid = os.getpid()  # a forked child's copy never writes: these are the parent's files
        self.attempt, self.rank = attempt, rank
        self.writer_id = f"w{int(time.time()):x}{secrets.token_hex(3)}"
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self._state: JsonObject = {}  # the latest status snapshot (a ``traincard.status`` event)
        self._summary: bytes | None = None  # this process's summary, until it is written
        self.dropped: dict[str, int] = {}
        self.segments_written = 0
        self.records_written = 0
        self.write_errors = 0  # failed writes (segments, parts, state), for the card and an OTel counter
        self.last_error: str | None = None  # the latest failure, one line
        self.last_error_at: float | None = None  # its wall-clock time
        self.backoff = Backoff()
        self._buffer: list[Record] = []
        self._buffered = 0  # rows in _buffer
        self._unwritten: list[tuple[int, bytes, list[Record], int]] = []  # (seq, payload, records, rows)
        self._closed: list[tuple[int, list[Record]]] = []  # written segments not compacted yet
        self._closed_records = 0  # rows in _closed
        self.compact_segments, self.compact_records = COMPACT_SEGMENTS, COMPACT_RECORDS
        self.parts_written = 0
        self.merger = Merger(
            backend,
            lambda first, last: layout.part_name(attempt, rank, self.writer_id, first, last),
            self._note_error,
        )
        self.compaction_note: str | None = None
        self._next_seq = 1
        self._closing = False
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- producers -------------------------------------------------------------------------
    def add(self, record: Record) -> None:
        self.add_many([record])

    def add_many(self, records: list[Record]) -> None:
        if os.getpid() != self.pid:
            return
        sizes = [segment.row_count(rec) for rec in records]
        with self._lock:
            room = self.max_pending - self._buffered - self._pending_unwritten()
            if room >= sum(sizes):
                self._buffer.extend(records)
                self._buffered += sum(sizes)
                return
            lost = 0
            for rec, size in zip(records, sizes, strict=True):
                if size <= room:
                    self._buffer.append(rec)
                    self._buffered += size
                    room -= size
                else:
                    lost += size
            self.dropped["buffer_full"] = self.dropped.get("buffer_full", 0) + lost

    def set_state(self, state: Mapping[str, JsonValue]) -> None:
        """Keep ``state`` as what the next flush writes to the state file (with our counts)."""
        if os.getpid() != self.pid:
            return
        with self._lock:
            self._state = dict(state)

    def set_summary(self, summary: Mapping[str, JsonValue]) -> None:
        """Keep ``summary`` (what this process saw, for sweeps) for the next flush to write, once."""
        if os.getpid() != self.pid:
            return
        data = json.dumps(summary, allow_nan=True, default=str).encode()  # as the state is
        with self._lock:
            self._summary = data

    def count_dropped(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + n

    def _pending_unwritten(self) -> int:
        return sum(rows for _seq, _payload, _records, rows in self._unwritten)

    # -- thread ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="traincard-store", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            if not self._stop.is_set():
                self._flush(retry_now=False)

    def request_flush(self) -> None:
        self._wake.set()

    @property
    def store_health(self) -> StoreHealthSection:
        """How writing to the store goes: failures so far, the last one, and what waits to be written."""
        with self._lock:
            pending = self._buffered + self._pending_unwritten()
        return {
            "write_errors": self.write_errors,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "pending_rows": pending,
            "retrying": self.backoff.retrying,
        }

    def flush_now(self) -> bool:
        """Write buffered records and state now, whatever the backoff; False if storage failed (data kept)."""
        return self._flush(retry_now=True)

    def _flush(self, *, retry_now: bool) -> bool:
        if os.getpid() != self.pid:
            return True  # nothing of a forked child's is written (its locks may be held, too)
        with self._io_lock:
            with self._lock:
                batch, rows, self._buffer, self._buffered = self._buffer, self._buffered, [], 0
            if batch:
                # Encoded outside the producers' lock: the converter must not wait for a whole batch.
                payload = segment.encode(batch)
                with self._lock:
                    self._unwritten.append((self._next_seq, payload, batch, rows))
                    self._next_seq += 1
            if not retry_now and not self.backoff.due():
                return False  # the store failed lately: the batch waits, encoded, for the next try
            errors = self.write_errors
            # After a failed segment the store is most likely down: the state waits too (one bounded
            # attempt per flush, not two).
            ok = self._write_segments()
            if ok:
                if self.write_errors == errors:
                    self.backoff.succeeded()  # the store answers again: the state written next says so
                self._maybe_compact()
                ok = self._write_state() and self._write_summary()
            if self.write_errors > errors:
                self.backoff.failed()
            return ok

    def _maybe_compact(self) -> None:
        """Merge closed segments into one Parquet part once there are enough of them.

        The part is written before the segments it covers are deleted, and readers skip segments a
        part covers, so a reader never sees a record twice or misses one.
        """
        if self.compaction_note is not None or not self._closed:
            return
        few = len(self._closed) < self.compact_segments and self._closed_records < self.compact_records
        if few and not (self._closing and self.parts_written):  # a long run ends with parts alone
            return
        try:
            from .compaction import to_parquet

            payload = to_parquet(self._closed)
        except ImportError:
            self.compaction_note = "store compaction is off: pyarrow is not installed (traincard-otel[store])"
            logger.warning("traincard: %s", self.compaction_note)
            self._closed, self._closed_records = [], 0
            return
        except Exception as exc:  # the segments stay readable; the writer must keep writing them
            self.compaction_note = f"store compaction is off: {type(exc).__name__}: {exc}"
            self._closed, self._closed_records = [], 0
            internal_error("store compaction", exc)
            return
        first, last = self._closed[0][0], self._closed[-1][0]
        try:
            self.backend.write(
                layout.part_name(self.attempt, self.rank, self.writer_id, first, last), payload
            )
        except Exception as exc:
            self._note_error(exc)
            if len(self._closed) > 4 * self.compact_segments:  # segments stay readable; stop holding them
                self._closed, self._closed_records = [], 0
            return
        self.parts_written += 1
        self.merger.add(Part(first, last, self._closed_records, 0))
        covered = [
            layout.segment_name(self.attempt, self.rank, self.writer_id, seq) for seq, _ in self._closed
        ]
        self._closed, self._closed_records = [], 0
        delete = getattr(self.backend, "delete", None)
        if delete is not None:
            try:
                delete(covered)
            except Exception as exc:  # leftovers are harmless: readers skip what a part covers
                self._note_error(exc)

    def _write_segments(self) -> bool:
        while self._unwritten:
            seq, payload, records, n = self._unwritten[0]
            try:
                self.backend.write(layout.segment_name(self.attempt, self.rank, self.writer_id, seq), payload)
            except Exception as exc:
                self._note_error(exc)
                return False
            with self._lock:
                self._unwritten.pop(0)
                self.segments_written += 1
                self.records_written += n
            self._closed.append((seq, records))
            self._closed_records += n
        return True

    def _write_state(self) -> bool:
        with self._lock:
            state = dict(self._state)
            state.update(
                attempt=self.attempt,
                rank=self.rank,
                writer=self.writer_id,
                flushed_at=time.time(),
                segments=self.segments_written,
                records=self.records_written,
                dropped=dict(self.dropped),
                pending=self._buffered + self._pending_unwritten(),
                write_errors=self.write_errors,
                parts=self.parts_written,
                parts_merged=self.merger.merged,
                compaction_note=self.compaction_note,
                last_write_error=self.last_error,
            )
        state["store_health"] = self.store_health
        try:
            data = json.dumps(state, default=str, allow_nan=True).encode()
            self.backend.write(layout.state_name(self.attempt, self.rank, self.writer_id), data)
        except Exception as exc:
            self._note_error(exc)
            return False
        return True

    def _write_summary(self) -> bool:
        with self._lock:
            data, self._summary = self._summary, None
        if data is None:
            return True
        try:
            self.backend.write(layout.summary_name(self.attempt, self.rank, self.writer_id), data)
        except Exception as exc:
            with self._lock:
                if self._summary is None:  # a newer one waits already: it replaces this one
                    self._summary = data
            self._note_error(exc)
            return False
        return True

    def _note_error(self, exc: Exception) -> None:
        first = self.last_error is None
        text = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line: datastore errors span many
        with self._lock:
            self.write_errors += 1
            self.last_error = text[:300]
            self.last_error_at = time.time()
        if first:
            logger.warning(
                "traincard: writing telemetry to the store failed (will retry): %s", self.last_error
            )

    def close(self, timeout_s: float = 3.0) -> bool:
        """Stop the thread after a final flush, waiting at most ``timeout_s``.

        What could not be written in time is counted as dropped (``unflushed_at_exit``) in the
        process's memory only, since the store may be the thing that is down.
        """
        self._stop.set()
        self._wake.set()
        self._closing = True
        deadline = time.monotonic() + timeout_s
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        done = threading.Event()
        result: list[bool] = [False]

        def final() -> None:
            result[0] = self.flush_now()
            done.set()

        threading.Thread(target=final, name="traincard-store-final", daemon=True).start()
        done.wait(max(0.0, deadline - time.monotonic()))
        self.merger.wait(max(0.0, deadline - time.monotonic()))  # a finished run ends merged
        if not done.is_set() or not result[0]:
            lost = self._buffered + self._pending_unwritten()
            if lost:
                logger.warning("traincard: %d telemetry records could not be written before exit", lost)
            return False
        return True
