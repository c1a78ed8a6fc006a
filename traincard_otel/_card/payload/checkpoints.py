"""The checkpoints table."""

from __future__ import annotations

from ..._store.reader import RunData
from ..._types import JsonObject


def checkpoint_rows(data: RunData, limit: int) -> list[JsonObject]:
    """The latest ``limit`` saves. Each save says whether it was the best *so far*; the card marks
    only the latest such one."""
    out = [dict(c) for c in data.checkpoints]
    best = [i for i, c in enumerate(out) if c.get("best")]
    for i, c in enumerate(out):
        c["best"] = bool(best) and i == best[-1]
    return out[-limit:]
