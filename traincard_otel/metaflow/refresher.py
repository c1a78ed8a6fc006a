"""Pushes live payloads to the step's ``traincard`` cards from a background thread.

Only the Metaflow task process drives the card. It reads the store (which every rank and child
process writes), so training in torchrun/accelerate children shows up the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .._safety import report_internal_error
from ..card.payload import build_payload
from ..store.backends import Backend
from ..store.reader import StoreReader


def traincard_cards() -> list[Any]:
    from metaflow import current

    card = getattr(current, "card", None)
    if card is None:
        return []
    try:
        return list(card.get(type="traincard"))
    except Exception:
        return []


class Refresher:
    """Every ``interval_s``: read the store, build a small live payload, refresh the cards."""

    def __init__(
        self,
        backend: Backend,
        title: str,
        interval_s: float,
        hourly_cost: float | None = None,
        cards: Callable[[], list[Any]] = traincard_cards,
    ) -> None:
        self.backend, self.title, self.interval_s, self.hourly_cost = backend, title, interval_s, hourly_cost
        self._cards = cards
        self.pushed = 0
        self._reader = StoreReader(backend, source=title)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traincard-refresher", daemon=True)

    def start(self) -> Refresher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.push()

    def push(self) -> None:
        cards = self._cards()
        if not cards:
            return
        try:
            data = self._reader.read()
            payload = build_payload(data, live=True, hourly_cost=self.hourly_cost)
            for card in cards:
                card.refresh(payload)
            self.pushed += 1
        except Exception as exc:
            report_internal_error("card refresher", exc)

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
