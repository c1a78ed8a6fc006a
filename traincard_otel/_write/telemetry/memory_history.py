"""CUDA memory at an out-of-memory error (the ``memory_history`` setting).

While on, PyTorch records every CUDA allocation with the Python frames that made it
(``torch.cuda.memory._record_memory_history``: the last ``MAX_ENTRIES`` events, Python stacks only,
about 2 µs per allocation). An observer attached to the allocator
(``torch._C._cuda_attach_out_of_memory_observer``) runs when an allocation fails, before the
exception unwinds: it takes the snapshot, writes it (pickled, as PyTorch's memory viewer at
https://pytorch.org/memory_viz opens it) into the store, and keeps its summary
(:func:`traincard_otel._analysis.memory.oom_summary`) for the failure's likely-OOM verdict, which
then names the largest live allocations and where they were made. This runs on the thread whose
allocation failed; the write is bounded by the store's timeouts, and the process is failing anyway.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Mapping
from typing import Final

from ..._analysis.memory import oom_summary
from ..._safety import internal_error
from ..._schema import Attr, Event
from ..._store.backends import Backend
from ..._types import Foreign, JsonObject

MAX_ENTRIES: Final = 20_000  # allocation events kept: a snapshot of tens of MB, not GBs

Emit = Callable[[str, Mapping[str, object], object], None]


def snapshot_name(attempt: int, rank: int, at: float) -> str:
    """The store object of a rank's snapshot at an out-of-memory error."""
    return f"memory/a{attempt}-r{rank}-{int(at)}.pickle"


class MemoryHistory:
    """Records CUDA allocations and saves the snapshot at an out-of-memory error."""

    def __init__(
        self, backend: Backend | None, *, rank: int, attempt: int, emit: Emit, step: Callable[[], object]
    ) -> None:
        self.backend, self.rank, self.attempt = backend, rank, attempt
        self._emit, self._step = emit, step
        self.at_oom: JsonObject | None = None  # the summary of the snapshot taken at the first OOM
        self.notes: list[str] = []  # why it is not recording, when asked to (the rank's state shows it)

    def start(self) -> bool:
        """Record the history and watch for an out-of-memory error; False (with a note) without CUDA."""
        try:
            import torch
        except ImportError:
            self.notes = ["memory_history: torch is not installed"]
            return False
        if not torch.cuda.is_available():
            self.notes = ["memory_history: no CUDA device, nothing to record"]
            return False
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            self.notes = ["memory_history: this PyTorch has no out-of-memory observer"]
            return False
        torch.cuda.memory._record_memory_history(
            enabled="all", context="all", stacks="python", max_entries=MAX_ENTRIES
        )
        attach(self._observe)
        return True

    def _observe(self, device: int, alloc: int, device_alloc: int, device_free: int) -> None:
        """The allocator's out-of-memory observer (``alloc``: the bytes asked for)."""
        if self.at_oom is not None:
            return  # the first OOM is the one that ends training; later ones repeat it
        try:
            import torch

            snap = torch.cuda.memory._snapshot()
            peak = int(torch.cuda.max_memory_allocated(device))
            summary = oom_summary(snap, peak_bytes=peak)
            summary["device"] = int(device)
            if summary.get("failed_alloc") is None:
                summary["failed_alloc"], summary["device_free"] = int(alloc), int(device_free)
            name = None
            if self.backend is not None:
                name = snapshot_name(self.attempt, self.rank, time.time())
                self.backend.write(name, pickle.dumps(snap))
                summary["snapshot"] = name
            self.at_oom = summary
            self._emit(
                Event.OOM_SNAPSHOT,
                {Attr.RANK: self.rank, Attr.STEP: _int(self._step()), Attr.MEMORY_SNAPSHOT: name or ""},
                summary,
            )
        except Exception as exc:
            internal_error("memory snapshot at OOM", exc)

    def stop(self) -> None:
        try:
            import torch

            torch.cuda.memory._record_memory_history(enabled=None)
        except Exception as exc:  # recording off at exit: nothing else depends on it
            internal_error("memory history stop", exc)


def _int(value: Foreign) -> int:
    return value if isinstance(value, int) else -1
