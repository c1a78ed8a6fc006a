"""The checkpoints table."""

from __future__ import annotations

from ..._data.rundata import RunData
from .contract import CheckpointRow


def checkpoint_rows(data: RunData, limit: int) -> list[CheckpointRow]:
    """The latest ``limit`` saves. Each save says whether it was the best *so far*; the card marks
    only the latest such one."""
    out: list[CheckpointRow] = [
        {
            "step": c.get("step"),
            "path": c.get("path"),
            "size_bytes": c.get("size_bytes"),
            "time": c.get("time"),
            "best": bool(c.get("best")),
            "metric": c.get("metric"),
            "value": c.get("value"),
            "attempt": c.get("attempt", 0),
            "rank": c.get("rank", 0),
        }
        for c in data.checkpoints
    ]
    best = [i for i, c in enumerate(out) if c.get("best")]
    for i, c in enumerate(out):
        c["best"] = bool(best) and i == best[-1]
    return out[-limit:]
