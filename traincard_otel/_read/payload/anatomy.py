"""The Step anatomy section (``payload["anatomy"]``): where each step's time goes.

One bar per rank shown (each part's median share of the recent window) and the parts over steps
for a stacked chart. A single rank shows itself; a gang shows the slowest rank (the one that works
longest in its own parts) beside the median rank. Drawn from the analysis
(:class:`traincard_otel._analysis.anatomy.StepAnatomy`); nothing is computed here but the layout.
"""

from __future__ import annotations

from typing import Final

from ..._analysis.anatomy import OTHER, RankAnatomy, StepAnatomy
from ..._data.anatomy import StepParts
from ..._data.rundata import RunData
from ..._schema import ANATOMY_PARTS
from .contract import AnatomyPartRow, AnatomyRankRow, AnatomySection, AnatomyStepsRow
from .series import Mode

CHART_POINTS: Final = 600  # steps per rank drawn in a full render (evenly picked)
LIVE_POINTS: Final = 60  # ... and in a live update (the latest)
#: What each adapter cannot tell apart, said under the section when a part was not measured.
NOT_MEASURED: Final = {
    "data": "no forward was timed, so the wait for the batch before it is unknown",
    "forward": "no module forward was timed: pass model= to instrument() for a raw loop or Accelerate",
    "backward": "no backward was timed: pass model= to instrument() for a raw loop or Accelerate",
    "optimizer": "no optimizer step was timed",
    "communication": "the wait for gradient collectives is timed from the model's backward: pass model=",
}


def _bar(r: RankAnatomy, role: str) -> AnatomyRankRow:
    parts: list[AnatomyPartRow] = [
        {"part": p, "seconds": r.seconds[p], "share": r.shares[p]} for p in ANATOMY_PARTS if p in r.seconds
    ]
    return {
        "rank": r.rank,
        "role": role,
        "steps": r.steps,
        "step_s": r.step_s,
        "own_s": r.own_s,
        "parts": parts,
        "unmeasured": list(r.unmeasured),
    }


def _steps(rank: int, parts: StepParts, names: list[str], mode: Mode) -> AnatomyStepsRow:
    n = len(parts)
    if mode.live:  # a smaller live payload (mode.tail) carries fewer steps
        picked = list(range(max(0, n - min(LIVE_POINTS, mode.tail)), n))
    elif n <= CHART_POINTS:
        picked = list(range(n))
    else:
        picked = sorted({round(i * (n - 1) / (CHART_POINTS - 1)) for i in range(CHART_POINTS)})
    rows = [parts.row(i) for i in picked]
    return {
        "rank": rank,
        "x": [float(parts.steps[i]) for i in picked],
        "parts": {p: [r[p] if r[p] == r[p] else None for r in rows] for p in names},
    }


def anatomy_section(data: RunData, anatomy: StepAnatomy | None, mode: Mode) -> AnatomySection | None:
    """The section, or None when no rank's steps carry an anatomy."""
    if anatomy is None:
        return None
    shown: list[tuple[RankAnatomy, str]]
    if len(anatomy.ranks) == 1:
        shown = [(anatomy.ranks[0], "")]
    else:
        slowest, median = anatomy.rank(anatomy.slowest or 0), anatomy.rank(anatomy.median or 0)
        shown = [(r, role) for r, role in ((slowest, "slowest"), (median, "median")) if r is not None]
    bars = [_bar(r, role) for r, role in shown]
    unmeasured = sorted({p for r, _ in shown for p in r.unmeasured}, key=ANATOMY_PARTS.index)
    series = [
        _steps(r.rank, data.anatomy[r.rank], [p for p in ANATOMY_PARTS if p in r.seconds], mode)
        for r, _ in shown
        if r.rank in data.anatomy
    ]
    return {
        "parts": list(ANATOMY_PARTS),
        "ranks": bars,
        "series": series,
        "ranks_timed": len(anatomy.ranks),
        "straggler": anatomy.straggler.text if anatomy.straggler is not None else None,
        "notes": [f"{p}: not measured ({NOT_MEASURED[p]})" for p in unmeasured if p != OTHER],
    }
