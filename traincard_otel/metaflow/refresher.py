"""Pushes live payloads to the step's ``traincard`` cards from a background thread.

Only the Metaflow task process drives the card. It reads the store (which every rank and child
process writes), so training in torchrun/accelerate children shows up the same way. It only reads:
the figures the pipeline reports as metrics and events (goodput, MFU, a gang's failed and hung
ranks) and the task's summary are the writers' own, never the card's.

Metaflow updates a card in a subprocess and drops a refresh asked for while the card's previous
subprocess still runs, but only after writing the refresh's data to a temporary file that only
that subprocess would delete (Metaflow 2.19): each dropped refresh leaves a file of tens of KB in
the temp dir, thousands over a long run. So a card is refreshed only once its subprocess is done,
and the refresher checks again shortly after rather than a whole interval later.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Protocol

from .._analysis.analysis import analyse
from .._analysis.baseline import Baseline
from .._data.rundata import RunData
from .._read.baseline import load_baseline
from .._read.load.reader import StoreReader
from .._read.payload import build_payload
from .._safety import report_internal_error
from .._store.backends import Backend
from .._types import Foreign
from .._write.pipeline import Pipeline
from .live_sweep import LiveSweep


def traincard_cards() -> list[Foreign]:
    from metaflow import current

    card = getattr(current, "card", None)
    if card is None:
        return []
    try:
        return list(card.get(type="traincard"))
    except Exception:
        return []


def card_busy(card: Foreign) -> bool:
    """Whether ``card``'s previous Metaflow card subprocess is still running (False if unknown).

    Reads the card manager's process table, private in Metaflow 2.19 (``@traincard`` renders
    final cards through the same manager).
    """
    try:
        from metaflow.plugins.cards.card_creator import CardProcessManager

        proc, _started = CardProcessManager._get_card_process(card._card_creator_args["card_uuid"])
        return proc is not None and proc.poll() is None
    except Exception:
        return False


class Reader(Protocol):
    """What the refresher reads a run through: a :class:`StoreReader` or a gang's reader."""

    def read(self) -> RunData: ...


class Refresher:
    """Every ``interval_s``: read the store, build a small live payload, refresh the cards."""

    def __init__(
        self,
        backend: Backend,
        title: str,
        interval_s: float,
        hourly_cost: float | None = None,
        cards: Callable[[], list[Foreign]] = traincard_cards,
        busy: Callable[[Foreign], bool] = card_busy,
        retry_s: float = 0.25,
        reader: Reader | None = None,
        baseline: str = "none",
        pathspec: str | None = None,
        sweep: LiveSweep | None = None,
    ) -> None:
        self.backend, self.title, self.interval_s, self.hourly_cost = backend, title, interval_s, hourly_cost
        self._cards, self._busy = cards, busy
        self.retry_s = min(retry_s, interval_s)
        self.pushed = 0
        # A gang's task reads every node's store (a GangReader); any other task, its own.
        self._reader: Reader = reader if reader is not None else StoreReader(backend, source=title)
        self.sweep = sweep  # the summaries of this task and its foreach siblings, for the Sweep section
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traincard-refresher", daemon=True)
        # The baseline is a finished run: found and read once, on its own thread (a slow metadata
        # service or datastore delays only the overlay), then kept for every later payload.
        self._baseline_spec, self._pathspec = baseline, pathspec
        self.baseline: Baseline | None = None
        self._baseline_thread = threading.Thread(
            target=self._find_baseline, name="traincard-baseline", daemon=True
        )

    def start(self) -> Refresher:
        self._thread.start()
        if self._baseline_spec != "none":
            self._baseline_thread.start()
        return self

    def _find_baseline(self) -> None:
        try:
            self.baseline = load_baseline(self._pathspec, self._baseline_spec, slim=True)
        except Exception as exc:  # load_baseline says why in a note; this is a bug of ours
            report_internal_error("finding the baseline run", exc)

    def _run(self) -> None:
        wait = self.interval_s
        while not self._stop.wait(wait):
            wait = self.interval_s if self.push() else self.retry_s

    def push(self) -> bool:
        """Refresh the cards with a payload built now; False if a card was busy (nothing done)."""
        cards = self._cards()
        if not cards:
            return True
        if any(self._busy(card) for card in cards):
            return False
        try:
            data = self._reader.read()
            insights = analyse(data, baseline=self.baseline)
            section = self.sweep.update(data, insights) if self.sweep is not None else None
            payload = build_payload(
                data,
                live=True,
                hourly_cost=self.hourly_cost,
                baseline=self.baseline,
                insights=insights,
                sweep=section,
            )
            for card in cards:
                card.refresh(payload)
            self.pushed += 1
        except Exception as exc:
            report_internal_error("card refresher", exc)
        return True

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)


#: Pipelines whose live card is driven already (by ``@traincard``, or by :func:`drive_live_card`).
_driven: weakref.WeakSet[Pipeline] = weakref.WeakSet()


def mark_driven(pipeline: Pipeline) -> None:
    """Say that ``pipeline``'s live card has its refresher (``@traincard`` starts its own)."""
    _driven.add(pipeline)


def drive_live_card(pipeline: Pipeline) -> None:
    """Start the live card's refresher for code inside a Metaflow step that has
    ``@card(type="traincard")`` but not ``@traincard`` (which drives its card itself); nothing
    outside such a step, and nothing twice."""
    if pipeline in _driven or pipeline.mf is None or pipeline.backend is None:
        return
    _driven.add(pipeline)
    if not traincard_cards():
        return
    settings = pipeline.settings
    refresher = Refresher(
        pipeline.backend,
        pipeline.mf.pathspec,
        settings.refresh_interval_s,
        hourly_cost=settings.hourly_cost,
        baseline=settings.baseline,
        pathspec=pipeline.mf.pathspec,
    ).start()
    pipeline.on_shutdown.append(refresher.stop)
