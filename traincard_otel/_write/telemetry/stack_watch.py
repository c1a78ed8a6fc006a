"""A rank's stack dumps: taken when the watchdog says so, or when ``traincard stacks`` asks.

The asking goes through the store: the command writes a ``stacks`` entry (an id and a time) into
the requests object (:mod:`traincard_otel._store.requests`) that each rank's watchdog reads every
``REQUEST_POLL_S``, so no port is opened and it works on any backend. The latest dump
goes into the rank's state (``stacks``) and every dump is a ``traincard.rank.stack`` event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..._analysis.gang.stacks import where
from ..._schema import Attr, Event
from ..._store import requests
from ..._types import JsonObject
from . import collectives, stacks

REQUEST_POLL_S = 3.0  # how often a rank looks for a request (stacks, a profile) in its store
ANSWER_KEPT_S = 60.0  # a healthy rank's answer stays in its state this long (then the state is small again)


class Emit(Protocol):
    def __call__(self, name: str, attributes: Mapping[str, object], body: object = None, /) -> None: ...


class StackWatch:
    """Takes, keeps and emits one rank's stack dumps (on the watchdog's thread, and once on the
    thread that ends a stalled rank)."""

    def __init__(self, emit: Emit, rank: int, host: str) -> None:
        self._emit, self.rank, self.host = emit, rank, host
        self.latest: JsonObject | None = None  # the latest dump while stalled (or asked for)
        self.next_request_check = 0.0
        self._answered: str | None = None  # the id of the last request answered

    def dump(self, reason: str, *, stalled: bool, request: str | None = None) -> JsonObject:
        """Record every thread's innermost frames now (:mod:`.stacks`) with the flight recorder's
        last collectives where it is on; keep it for the state and emit it."""
        dump = stacks.capture(reason, self.rank, request=request)
        dump["stalled"] = stalled
        if self._answered is not None:  # later refreshes still answer it (the asker may read late)
            dump["answered"] = self._answered
        recorded = collectives.read()
        if recorded is not None:
            dump["collectives"] = recorded
            stacks.bounded(dump)
        self.latest = dump
        attrs: dict[str, object] = {
            Attr.RANK: self.rank,
            Attr.HOST_NAME: self.host,
            Attr.STACK_REASON: reason,
            Attr.STACK_WHERE: where(dump)["text"],
        }
        if request is not None:
            attrs[Attr.STACK_REQUEST] = request
        self._emit(Event.RANK_STACK, attrs, dump)
        return dump

    def forget_stall(self) -> None:
        """The stall is over: where it was stuck is history (the events keep it)."""
        if self.latest is not None and self.latest.get("reason") == "stall":
            self.latest = None

    def forget_answer(self, now: float) -> None:
        """A healthy rank's answer has been read by now: its state need not carry it any more."""
        latest = self.latest
        if latest is not None and not latest.get("stalled") and now - float(latest["time"]) > ANSWER_KEPT_S:
            self.latest = None

    def answer(self, entry: object, *, stalled: bool, now: float | None = None) -> None:
        """Answer a ``traincard stacks`` request (the requests' ``stacks`` entry) once: a dump with
        its id, in the next state this rank writes."""
        found = requests.current(entry, now)
        if found is not None and found[0] != self._answered:
            self._answered = found[0]
            self.dump("request", stalled=stalled, request=found[0])
