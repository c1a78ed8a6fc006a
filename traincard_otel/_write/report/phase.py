"""A training phase (``Reporter.phase``): a span of the OTel stream, ended on the training thread."""

from __future__ import annotations

import time
from types import TracebackType

from ..._schema import PhaseEnd
from ..queue import ReportQueue


class Phase:
    """A training phase (``train``, ``eval``, ``save`` ...); a span in the OTel stream.

    Use as a context manager, or call :meth:`end` yourself.
    """

    __slots__ = ("_ended", "_queue", "name", "token")

    def __init__(self, queue: ReportQueue | None, name: str, token: int) -> None:
        self._queue, self.name, self.token, self._ended = queue, name, token, False

    def __enter__(self) -> Phase:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(error=exc)

    def end(self, error: BaseException | None = None) -> None:
        """End the phase (idempotent); ``error`` marks its span as failed."""
        if self._ended:
            return
        self._ended = True
        q = self._queue
        if q is None:
            return
        entry = (self.token, self.name)
        if entry in q.open_phases:
            q.open_phases.remove(entry)
        err = None if error is None else (type(error).__name__, str(error))
        q.step_clock = time.perf_counter()  # the phase's time is no step's (Reporter.step_end)
        q.put(PhaseEnd(time.time(), self.token, err))
