"""The live card refresher: payloads pushed on a period, never while a card's subprocess runs."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from traincard_otel._store.backends import LocalBackend
from traincard_otel.metaflow.refresher import Refresher, card_busy


class Card:
    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def refresh(self, payload: dict[str, Any]) -> None:
        self.payloads.append(payload)


class Waits:
    """Stands in for the refresher's stop event: records each wait, stops after ``rounds``."""

    def __init__(self, rounds: int) -> None:
        self.asked: list[float] = []
        self.rounds = rounds

    def wait(self, seconds: float) -> bool:
        self.asked.append(seconds)
        return len(self.asked) > self.rounds


def test_a_busy_card_is_not_refreshed_and_the_refresher_checks_again_soon(tmp_path: Path) -> None:
    card, answers = Card(), [True, True]
    refresher = Refresher(
        LocalBackend(str(tmp_path)),
        "t",
        30.0,
        cards=lambda: [card],
        busy=lambda c: answers.pop(0) if answers else False,
        retry_s=0.01,
    )
    waits = refresher._stop = Waits(rounds=4)  # type: ignore[assignment]
    refresher._run()
    assert waits.asked == [30.0, 0.01, 0.01, 30.0, 30.0]  # busy, busy, pushed, pushed
    assert (refresher.pushed, len(card.payloads)) == (2, 2)
    assert card.payloads[0]["live"] is True


def test_push_while_busy_builds_no_payload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    card = Card()
    refresher = Refresher(LocalBackend(str(tmp_path)), "t", 1.0, cards=lambda: [card], busy=lambda c: True)
    monkeypatch.setattr(refresher._reader, "read", lambda: pytest.fail("the store was read"))
    assert refresher.push() is False
    assert (refresher.pushed, card.payloads) == (0, [])


def test_card_busy_reads_metaflows_card_process_table() -> None:
    pytest.importorskip("metaflow")
    from metaflow.plugins.cards.card_creator import CardProcessManager

    class Manager:  # what current.card.get() returns, as far as card_busy looks
        _card_creator_args = {"card_uuid": f"test-{uuid.uuid4()}"}

    manager = Manager()
    key = manager._card_creator_args["card_uuid"]
    assert card_busy(manager) is False  # no subprocess started for this card
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    CardProcessManager._register_card_process(key, proc)
    try:
        assert card_busy(manager) is True
        proc.kill()
        proc.wait()
        assert card_busy(manager) is False
    finally:
        CardProcessManager.async_card_processes.pop(key, None)
    assert card_busy(object()) is False  # not a Metaflow card manager: refreshed as before
