"""The Sweep section of a task's live card: its foreach siblings' summaries (or the branches a join
joins), as their writers keep them in the store, beside this task's own.

Nothing here writes: each process that writes telemetry writes its own summary
(:mod:`traincard_otel._write.pipeline.own_summary`). The refresher reads the summaries of the
tasks this one compares at most every :data:`SIBLINGS_INTERVAL_S`, growing by
:data:`SIBLING_READ_S` per task read: a sibling is a task of the same step whose summary places it
in the same foreach split. This task's own row is made, at the same moments, from what the
refresher read of its store for the card (its writers write theirs every 10 s, and a short task's
only as it ends). Nothing here reads another task's telemetry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final, cast

from .._analysis.analysis import Insights
from .._analysis.summary import task_summary
from .._data.rundata import RunData
from .._read.load.summaries import StepFolder, branches
from .._read.payload.contract import SweepSection
from .._read.payload.sweep import sweep_section
from .._store.backends import Backend
from .._types import JsonObject

SIBLINGS_INTERVAL_S: Final = 5.0
SIBLING_READ_S: Final = 0.05  # ...plus this per sibling: 1,000 branches on S3 read each other every 55 s


class LiveSweep:
    """What the refresher draws in the Sweep section of one task (a foreach branch or a join)."""

    def __init__(
        self,
        backend: Backend,
        pathspec: str,
        *,
        position: JsonObject | None = None,
        joins: Sequence[str] = (),
    ) -> None:
        self.backend, self.pathspec = backend, pathspec
        self.position, self.joins = position, list(joins)
        self.compares = position is not None or bool(joins)
        self._read_at = -SIBLINGS_INTERVAL_S
        self._found: dict[str, JsonObject] = {}
        self._title = ""
        self._section: SweepSection | None = None
        self._folders: dict[str | None, StepFolder] = {}  # the step folders read, kept between reads

    def update(self, data: RunData, insights: Insights, *, force: bool = False) -> SweepSection | None:
        """The Sweep section for this refresh (None for a task that compares nothing); the
        summaries are read again, and this task's own made from ``data``, only when due (or
        ``force``): a summary scans every metric's whole series, too much for every refresh."""
        if not self.compares:
            return None
        now = time.monotonic()
        if force or now - self._read_at >= SIBLINGS_INTERVAL_S + SIBLING_READ_S * len(self._found):
            own = cast(
                JsonObject,
                dict(
                    task_summary(
                        data, insights, pathspec=self.pathspec, sweep=self.position, joins=self.joins
                    )
                ),
            )
            found = branches(self.backend, own, self._folders)
            if found is not None:
                self._title, self._found = found
                if not self.joins:  # the freshest figures of this task are the ones just read
                    self._found[self.pathspec.rsplit("/", 1)[-1]] = own
                self._section = None
            self._read_at = now
        if self._section is None:
            self._section = sweep_section(dict(self._found), title=self._title, own=self.pathspec, live=True)
        return self._section
