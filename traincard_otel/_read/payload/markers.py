"""Vertical lines on every step chart where the run restarted (a retry) or rewound (a resume)."""

from __future__ import annotations

from ..._data.rundata import RunData
from ..._schema import Attr, Event
from .contract import MarkerRow


def _first_step(data: RunData, attempt: int) -> int | None:
    steps = [
        s
        for series in data.metrics.values()
        for s, a in zip(series.steps, series.attempts, strict=False)
        if a == attempt and s is not None
    ]
    return min(steps) if steps else None


def discontinuities(data: RunData) -> list[MarkerRow]:
    """``restart`` markers at each retry's first step, ``rewind`` markers where a run resumed."""
    out: list[MarkerRow] = []
    for ev in data.events:
        if ev["name"] == Event.RUN_STARTED and ev["attempt"] > 0 and ev["rank"] == 0:
            step = _first_step(data, ev["attempt"])
            if step is not None:
                out.append({"x": step, "label": f"attempt {ev['attempt']} (retry)", "kind": "restart"})
        elif ev["name"] in (Event.RUN_RESUMED, Event.RUN_REWIND):
            step = ev["attributes"].get(Attr.STEP)
            if step is not None:
                out.append({"x": step, "label": f"resumed at step {step}", "kind": "rewind"})
    return out
