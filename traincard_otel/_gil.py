"""Background work in slices: a background thread gives the GIL away every ``SLICE_S``.

A thread that holds the GIL keeps it until it blocks or, when another thread asks for it, until
the interpreter's switch interval (5 ms) has passed: a background thread parsing a burst of
printed lines or encoding a flush would stop the training thread for up to that long at a time.
So long loops on background threads call :meth:`Slices.check` per item: past a slice of
``SLICE_S`` it sleeps ``PAUSE_S``, long enough for a thread waiting for the GIL to take it (a
``sleep(0)`` releases it for too short a time: the same thread takes it back first).
"""

from __future__ import annotations

import time

SLICE_S = 0.0008
PAUSE_S = 0.00005


class Slices:
    """The clock of one stretch of background work."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = time.perf_counter() + SLICE_S

    def check(self) -> None:
        """Pause if this stretch has run a slice since it last did."""
        if time.perf_counter() >= self._until:
            time.sleep(PAUSE_S)
            self._until = time.perf_counter() + SLICE_S
