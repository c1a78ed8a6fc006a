"""Waiting with a deadline: shutdown must never hang the process, whatever an exporter does."""

from __future__ import annotations

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


def bounded(fn: Callable[[], T], timeout_s: float, default: T) -> T:
    """Run ``fn`` on a daemon thread and wait at most ``timeout_s`` for its result."""
    box: list[T] = [default]

    def run() -> None:
        try:
            box[0] = fn()
        except Exception as exc:
            report_internal_error("bounded call", exc)

    t = threading.Thread(target=run, name="traincard-bounded", daemon=True)
    t.start()
    t.join(timeout_s)
    return box[0]
