"""The pipeline's profile captures: answering ``traincard profile`` and the ``profile_on`` triggers.

A request comes through the store's requests object (its ``profile`` entry, read by the
watchdog's poll with the ``stacks`` one: :mod:`traincard_otel._store.requests`); it names the ranks
it asks (``all`` or a list) and each of them captures once. ``profile_on`` kinds start a capture
by themselves, at most once per ``WINDOW_S`` each: an anomaly the converter emits on this rank
(``throughput_drop``, ``loss_spike``, ``grad_explosion``) starts one here; a straggler, which only
the ranks' states together show, is found by rank 0's watchdog when it reads them, and asked of
every rank through the store, as ``traincard profile`` asks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Final

from opentelemetry.util.types import AnyValue

from ..._analysis.anatomy import RankAnatomy, straggler
from ..._schema import Attr, Event
from ..._store import requests
from ..._store.backends import Backend
from ..._types import JsonObject, JsonValue
from ..convert.spans import EventObserver
from ..queue import ReportQueue
from ..telemetry.profiler import DEFAULT_STEPS, Ask, Emit, ProfileCapture

WINDOW_S: Final = 30 * 60.0  # a profile_on kind starts at most one capture in this long


def _ranks(value: JsonValue, rank: int) -> bool:
    """Whether a request's ``ranks`` (``"all"`` or a list of ranks) names ``rank``."""
    if value in (None, "all"):
        return True
    return isinstance(value, list) and rank in value


def _state_anatomy(state: JsonObject) -> RankAnatomy | None:
    a = state.get("anatomy")
    if not isinstance(a, dict) or not isinstance(a.get("seconds"), dict):
        return None
    try:
        return RankAnatomy(
            rank=int(state.get("rank", 0)),
            steps=int(a["steps"]),
            step_s=float(a["step_s"]),
            own_s=float(a["own_s"]),
            seconds={str(k): float(v) for k, v in a["seconds"].items()},
            shares={},
            unmeasured=(),
        )
    except (KeyError, TypeError, ValueError):
        return None


class Profiling:
    """One process's profile captures and what starts them."""

    def __init__(
        self,
        kinds: tuple[str, ...],
        queue: ReportQueue,
        backend: Backend,
        *,
        rank: int,
        attempt: int,
        emit: Emit,
    ) -> None:
        self.kinds, self.backend, self.rank, self.attempt = kinds, backend, rank, attempt
        self.capture = ProfileCapture(queue, backend, rank=rank, attempt=attempt, emit=emit)
        self._fired: dict[str, float] = {}

    # -- the watchdog's thread -------------------------------------------------------------------
    def request(self, entry: object) -> None:
        """The requests object's ``profile`` entry: captured once if it names this rank."""
        found = requests.current(entry)
        if found is None:
            return
        ident, asked = found
        if int(asked.get("attempt", self.attempt)) != self.attempt or not _ranks(
            asked.get("ranks"), self.rank
        ):
            return
        steps = asked.get("steps")
        self.capture.ask(
            Ask(
                id=ident,
                steps=steps if isinstance(steps, int) and steps > 0 else DEFAULT_STEPS,
                shapes=bool(asked.get("shapes")),
                stacks=bool(asked.get("stacks")),
                trigger=str(asked.get("trigger") or "request"),
                detail=str(asked.get("detail") or ""),
                asked_at=float(asked["time"]),
            )
        )

    def states(self, states: list[JsonObject]) -> None:
        """Rank 0's read of every rank's state: a straggler starts a capture on every rank."""
        if "straggler" not in self.kinds or self.backend is None or not self._may_fire("straggler"):
            return
        latest = max((int(s.get("attempt", 0)) for s in states), default=0)
        ranks = [
            a
            for s in states
            if int(s.get("attempt", 0)) == latest and s.get("status") == "running"
            if (a := _state_anatomy(s)) is not None
        ]
        found = straggler(ranks)[2]
        if found is None:
            return
        self._fired["straggler"] = time.time()
        entry = {
            "id": f"straggler-{uuid.uuid4().hex[:8]}",
            "time": time.time(),
            "steps": DEFAULT_STEPS,
            "ranks": "all",
            "attempt": latest,
            "trigger": "straggler",
            "detail": found.text,
        }
        requests.ask(self.backend, "profile", entry)

    # -- the converter's thread ------------------------------------------------------------------
    def observe(self, t: float, name: str | None, body: AnyValue, attributes: Mapping[str, AnyValue]) -> None:
        """An event the converter emitted: an anomaly of a ``profile_on`` kind starts a capture."""
        if name != Event.ANOMALY:
            return
        kind = str(attributes.get(Attr.ANOMALY_KIND, ""))
        if kind in self.kinds and self._may_fire(kind):
            ask = Ask(
                id=f"{kind.replace('_', '-')}-{uuid.uuid4().hex[:8]}", trigger=kind, detail=str(body or "")
            )
            if self.capture.ask(ask):
                self._fired[kind] = time.time()

    def _may_fire(self, kind: str) -> bool:
        return time.time() - self._fired.get(kind, -WINDOW_S) >= WINDOW_S


def observers(*observers: EventObserver | None) -> EventObserver | None:
    """One observer of the converter's events that tells each of ``observers`` in turn (None: none)."""
    found = [o for o in observers if o is not None]
    if len(found) < 2:
        return found[0] if found else None

    def each(t: float, name: str | None, body: AnyValue, attributes: Mapping[str, AnyValue]) -> None:
        for observer in found:
            observer(t, name, body, attributes)

    return each
