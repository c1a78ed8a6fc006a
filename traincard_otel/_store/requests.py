"""What the running ranks are asked through the store (:data:`.layout.REQUESTS`): one object that
every rank's watchdog reads every few seconds, so a question costs no port and works on any
backend. Each entry (``stacks``, ``profile``) has an ``id`` and a ``time``; a rank answers an
entry once, and only one asked after it could have been running (``MAX_AGE_S``)."""

from __future__ import annotations

import json
import time

from .._types import JsonObject
from . import layout
from .backends import Backend, read_one

MAX_AGE_S = 120.0  # an older entry is not answered (a rank that started after it)
KINDS = ("stacks", "profile")


def read(backend: Backend) -> JsonObject:
    """The entries asked so far (``{}`` when none, or when the object is not one this version
    wrote)."""
    raw = read_one(backend, layout.REQUESTS)
    if raw is None:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if k in KINDS and isinstance(v, dict)}


def current(entry: object, now: float | None = None) -> tuple[str, JsonObject] | None:
    """``(id, entry)`` for an entry young enough to answer; None for one that is old or malformed."""
    if not isinstance(entry, dict):
        return None
    try:
        ident, asked_at = str(entry["id"]), float(entry["time"])
    except (KeyError, TypeError, ValueError):
        return None
    now = time.time() if now is None else now
    return (ident, entry) if now - asked_at <= MAX_AGE_S else None


def ask(backend: Backend, kind: str, entry: JsonObject) -> None:
    """Ask the ranks ``kind`` (``entry`` holds its ``id`` and ``time``), keeping the other kinds'
    entries (a question asked at the same moment by another caller may be lost: ask again)."""
    asked = read(backend)
    asked[kind] = entry
    backend.write(layout.REQUESTS, json.dumps(asked).encode())
