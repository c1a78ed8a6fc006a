"""This process's summary for sweeps: what its converter saw, written by its own store writer.

Every process that writes telemetry keeps one
(:class:`~traincard_otel._write.convert.tally.RunTally`: its metrics' final and best values, the
main metric's curve, its hyperparameters, its attempt's goodput and its rank's MFU) and hands it to
its writer at its first flush, then at most every :data:`SUMMARY_INTERVAL_S`, and once more as it
shuts down; the writer writes it as an object of its own
(``summary/a<attempt>-r<rank>-<writer>.json``). A task's summary is its writers' merged when read
(:func:`traincard_otel._analysis.summary.merge_summaries`): a torchrun rank 0 reports the metrics,
the Metaflow step process that started it the foreach position and the flow's parameters.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Final, Protocol

from ..._analysis.efficiency import RankEfficiency
from ..._analysis.goodput import Goodput
from ..._analysis.summary import TaskSummarySection
from ..._identity import MetaflowIdentity
from ..._safety import internal_error
from ..._types import JsonObject, JsonValue
from ..convert.tally import RunTally
from ..store.writer import StoreWriter

SUMMARY_INTERVAL_S: Final = 10.0


class SummarySource(Protocol):
    """What the summary reads of the running pipeline."""

    status: str
    started_at: float
    attempt: int
    mf: MetaflowIdentity | None

    def goodput(self) -> Goodput | None: ...

    def efficiency(self) -> RankEfficiency | None: ...


def _failure_text(failure: Mapping[str, JsonValue] | None) -> str | None:
    if not failure:
        return None
    return f"{failure.get('type') or 'error'}: {failure.get('message') or ''}".strip()[:300]


class OwnSummary:
    """Hands this process's summary to its writer when due (see the module docstring)."""

    def __init__(self, writer: StoreWriter, tally: RunTally, source: SummarySource) -> None:
        self._writer, self._tally, self._source = writer, tally, source
        self._due = 0.0  # the first flush writes one: a sibling's card lists this task from then on

    def tick(self, step: int | None, failure: JsonObject | None) -> None:
        """Hand the summary over if :data:`SUMMARY_INTERVAL_S` went by since the last time."""
        now = time.monotonic()
        if now >= self._due:
            self._due = now + SUMMARY_INTERVAL_S
            self.hand_over(step, failure)

    def hand_over(self, step: int | None, failure: JsonObject | None) -> None:
        """Hand the summary as it is now to the writer (its next flush writes it)."""
        try:
            self._writer.set_summary(self.summary(step, failure))
        except Exception as exc:
            internal_error("the process's summary", exc)

    def summary(self, step: int | None, failure: JsonObject | None) -> TaskSummarySection:
        source, now = self._source, time.time()
        goodput, efficiency, mf = source.goodput(), source.efficiency(), source.mf
        out = self._tally.summary()
        out.update(
            {
                "pathspec": mf.pathspec if mf is not None else None,
                "status": source.status,
                "step": step,
                "started_at": source.started_at,
                "updated_at": now,
                "duration_s": now - source.started_at,
                "goodput": goodput.ratio if goodput is not None else None,
                "productive_s": goodput.seconds["productive"] if goodput is not None else None,
                "mfu": efficiency.mfu if efficiency is not None else None,
                "failure": _failure_text(failure),
                "sweep": dict(mf.foreach.as_dict()) if mf is not None and mf.foreach is not None else None,
                "joins": list(mf.joins) if mf is not None else [],
                "attempt": source.attempt,
                "rank": self._tally.rank,
                "writer": self._writer.writer_id,
            }
        )
        return out
