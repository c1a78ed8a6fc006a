"""A task's summary kept in the store, and the Sweep section of its card.

The refresher writes this task's summary (:mod:`traincard_otel._analysis.summary`) at most every
:data:`SUMMARY_INTERVAL_S` and at the end, and, for a foreach branch or a join, reads its
siblings' (or the joined branches') summaries at most every :data:`SIBLINGS_INTERVAL_S`: a sibling
is a task of the same step whose summary places it in the same foreach split (the interval grows
by :data:`SIBLING_READ_S` per sibling). Nothing here reads another task's telemetry.
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
from .._write.store.summary import write_summary

SUMMARY_INTERVAL_S: Final = 10.0
SIBLINGS_INTERVAL_S: Final = 5.0
SIBLING_READ_S: Final = 0.05  # ...plus this per sibling: 1,000 branches on S3 read each other every 55 s


class LiveSweep:
    """What the refresher needs for summaries and the Sweep section of one task."""

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
        self._written_at = -SUMMARY_INTERVAL_S
        self._read_at = -SIBLINGS_INTERVAL_S
        self._others: dict[str, JsonObject] = {}
        self._title = ""
        self.summary: JsonObject | None = None
        self._section: SweepSection | None = None
        self._folders: dict[str | None, StepFolder] = {}  # until the summary or the siblings change

    @property
    def compares(self) -> bool:
        return self.position is not None or bool(self.joins)

    def update(self, data: RunData, insights: Insights, *, force: bool = False) -> SweepSection | None:
        """The Sweep section for this refresh. This task's summary is made from ``data`` only when
        it is due to be written or the siblings to be read (or ``force``): a summary scans every
        metric's whole series, too much for every refresh of a long run."""
        now = time.monotonic()
        write = force or now - self._written_at >= SUMMARY_INTERVAL_S
        read = self.compares and (
            force or now - self._read_at >= SIBLINGS_INTERVAL_S + SIBLING_READ_S * len(self._others)
        )
        if write or read or self.summary is None:
            self.summary = cast(
                JsonObject,
                dict(
                    task_summary(
                        data, insights, pathspec=self.pathspec, sweep=self.position, joins=self.joins
                    )
                ),
            )
            self._section = None
        summary = self.summary
        if write:
            write_summary(self.backend, summary)
            self._written_at = now
        if not self.compares:
            return None
        if read:
            found = branches(self.backend, summary, self._folders)
            if found is not None:
                self._title, self._others = found
            self._read_at = now
        if self._section is None:
            others = dict(self._others)
            if not self.joins:
                others[self.pathspec.rsplit("/", 1)[-1]] = summary
            self._section = sweep_section(others, title=self._title, own=self.pathspec, live=True)
        return self._section
