"""Profile captures as the store holds them (``profiles/<id>/r<rank>.json`` beside each rank's
``r<rank>.trace.json.gz``, written by :mod:`traincard_otel._write.telemetry.profiler`), gathered by
capture for :class:`~traincard_otel._data.rundata.RunData`'s ``profiles``."""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..._store.backends import Backend, LocalBackend, MetaflowBackend
from ..._types import JsonObject


def location(backend: Backend, name: str) -> str:
    """Where object ``name`` of ``backend`` is, as a user would open or copy it: a local path, an
    ``s3://``/``gs://`` URL, else the store's spec and the name."""
    if isinstance(backend, LocalBackend):
        return str((backend.root / name).resolve())
    if isinstance(backend, MetaflowBackend):
        key = backend._key(name)
        if backend.ds_type == "local":
            return f"{backend.ds_root}/{key}"
        return (
            f"{backend.ds_root}/{key}"
            if "://" in backend.ds_root
            else f"{backend.ds_type}://{backend.ds_root}/{key}"
        )
    return f"{backend.spec.rstrip('/')}/{name}"


def rank_summary(raw: bytes, backend: Backend) -> JsonObject | None:
    """One rank's summary with its trace's location; None for one that does not parse."""
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("id"), str):
        return None
    trace = found.get("trace")
    if isinstance(trace, str):
        found["trace_location"] = location(backend, trace)
    return found


def captures(summaries: Mapping[str, JsonObject], store: str) -> list[JsonObject]:
    """Rank summaries (by object name) grouped by capture, oldest first: id, trigger, detail, when
    asked, the steps, the store (as a target ``traincard`` takes), the ranks that answered and each
    rank's summary."""
    by_id: dict[str, JsonObject] = {}
    for _name, s in sorted(summaries.items()):
        capture = by_id.setdefault(
            s["id"],
            {
                "id": s["id"],
                "trigger": s.get("trigger"),
                "detail": s.get("detail"),
                "asked_at": s.get("asked_at"),
                "attempt": s.get("attempt"),
                "store": store,
                "ranks": {},
            },
        )
        capture["ranks"][int(s.get("rank", 0))] = s
    out = sorted(by_id.values(), key=lambda c: (c.get("asked_at") or 0, c["id"]))
    for c in out:
        steps = [r["steps"] for r in c["ranks"].values() if isinstance(r.get("steps"), list)]
        c["steps"] = steps[0] if steps else None
    return out
