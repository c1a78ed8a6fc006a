"""Waiting with a deadline: shutdown must never hang the process, whatever an exporter does."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..._safety import report_internal_error

T = TypeVar("T")


def left(deadline: float, cap: float | None = None) -> float:
    """Seconds until ``deadline`` (``time.monotonic()``), at most ``cap``."""
    remaining = max(0.0, deadline - time.monotonic())
    return min(remaining, cap) if cap is not None else remaining


class _Worker:
    """A daemon thread that runs the calls handed to it, one after the other, and then waits to be
    handed the next (starting a thread per call cost more than a flush of a run's last seconds)."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="traincard-bounded", daemon=True).start()

    def _run(self) -> None:
        while True:
            self.calls.get()()
            with _lock:
                _idle.append(self)


_lock = threading.Lock()
_idle: list[_Worker] = []  # workers with nothing to do; one still running a late call is not here


def _forget_workers() -> None:
    _idle.clear()  # a forked child has none of its parent's threads


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def bounded(fn: Callable[[], T], timeout_s: float, default: T) -> T:
    """Run ``fn`` on a daemon thread and wait at most ``timeout_s`` for its result.

    A call that outlives its wait keeps its thread; the next call gets another one.
    """
    box: list[T] = [default]
    done = threading.Event()

    def run() -> None:
        try:
            box[0] = fn()
        except Exception as exc:
            report_internal_error("bounded call", exc)
        finally:
            done.set()

    with _lock:
        worker = _idle.pop() if _idle else None
    (worker or _Worker()).calls.put(run)
    done.wait(timeout_s)
    return box[0]
