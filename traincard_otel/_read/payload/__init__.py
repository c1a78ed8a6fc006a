"""RunData -> the card payload (``docs/card-payload.md``). Pure: no Metaflow, no I/O.

One builder per card section (:mod:`.status`, :mod:`.training`, :mod:`.system`, :mod:`.banners`,
:mod:`.markers`, :mod:`.checkpoints`, :mod:`.logs`, :mod:`.health`, :mod:`.anatomy`,
:mod:`.profiles` ...), assembled here; display
downsampling is in :mod:`.series`. Live payloads carry only each section's tail and stay small.
"""

from __future__ import annotations

import json

from ..._analysis.analysis import Insights, analyse
from ..._analysis.baseline import Baseline
from ..._data.rundata import RunData
from ..._text import scrub
from .agents import agents_section
from .anatomy import anatomy_section
from .banners import all_banners, lost_ranks
from .baseline import baseline_section
from .checkpoints import checkpoint_rows
from .completions import completions_section
from .contract import CardPayload, EmptyReasonsSection, SweepSection, SystemSection
from .gang import gang_section
from .health import loss_counters
from .insights import anomaly_markers, insights_section, mfu_charts
from .kind import RL, run_kind
from .logs import log_lines
from .markers import discontinuities
from .names import wire_names
from .profiles import profiles_section
from .rl import rl_charts
from .series import LIVE_LOG_TAIL, LIVE_TAIL, MAX_POINTS, Mode, downsample
from .status import run_status
from .system import system_charts, system_section
from .training import summary_table, training_charts

SCHEMA_VERSION = 1
LIVE_MAX_BYTES = 60_000  # live payloads must stay small: Metaflow stores and serves each one whole

__all__ = [
    "LIVE_MAX_BYTES",
    "MAX_POINTS",
    "SCHEMA_VERSION",
    "Mode",
    "build_payload",
    "downsample",
    "lost_ranks",
    "run_status",
    "system_charts",
    "training_charts",
]


def build_payload(
    data: RunData,
    *,
    live: bool = False,
    final: bool = False,
    now: float | None = None,
    hourly_cost: float | None = None,
    baseline: Baseline | None = None,
    insights: Insights | None = None,
    sweep: SweepSection | None = None,
) -> CardPayload:
    """The card payload for ``data``; ``live`` makes a small tail-only update (< ``LIVE_MAX_BYTES``).

    ``baseline`` is the run overlaid on the charts and compared with in the status bar
    (:mod:`.baseline`). ``insights`` is the run's analysis at ``now`` with that baseline
    (:func:`~traincard_otel._analysis.analysis.analyse`; computed here when not given): the card
    draws it, and analyses nothing itself. ``sweep`` is the Sweep section, built from the
    branches' summaries by the caller (:func:`.sweep.sweep_section`), carried as it is.
    """
    if insights is None:
        insights = analyse(data, now=now, baseline=baseline)
    now = insights.now
    if not live:
        return _build(
            data,
            Mode(live=False),
            final=final,
            hourly_cost=hourly_cost,
            baseline=baseline,
            insights=insights,
            sweep=sweep,
        )
    for tail, log_tail, heads in (
        (LIVE_TAIL, LIVE_LOG_TAIL, True),
        (20, 40, True),
        (20, 40, False),
        (6, 20, False),
        (2, 10, False),
    ):
        payload = _build(
            data,
            Mode(True, tail, log_tail, heads),
            final=final,
            hourly_cost=hourly_cost,
            baseline=baseline,
            insights=insights,
            sweep=sweep,
        )
        if len(json.dumps(payload)) <= LIVE_MAX_BYTES:
            break
    # Metaflow serializes live payloads itself: hand it text that any encoder accepts.
    scrubbed: CardPayload = scrub(payload)  # the same shape, every string encodable
    return scrubbed


def _empty_reasons(data: RunData, system: SystemSection) -> EmptyReasonsSection:
    """Why a section has nothing to show (the page shows it only when the section is empty)."""
    if not data.states:
        why_training = "No training metrics yet: nothing has been recorded for this run so far."
    else:
        why_training = "No training metrics reported yet: the run has not reported a scalar."
    if system["notes"]:
        why_system = "No system figures: " + "; ".join(system["notes"])
    elif not data.states:
        why_system = "No system figures yet: nothing has been recorded for this run so far."
    else:
        why_system = "No system figures: system sampling was off or had not taken a sample yet."
    return {
        "training": why_training,
        "system": why_system,
        "checkpoints": "No checkpoints saved yet.",
        "logs": "No log lines yet.",
    }


def _build(
    data: RunData,
    mode: Mode,
    *,
    final: bool,
    hourly_cost: float | None,
    baseline: Baseline | None,
    insights: Insights,
    sweep: SweepSection | None = None,
) -> CardPayload:
    now = insights.now
    kind = run_kind(data)
    status = run_status(data, now, hourly_cost, kind)
    system = system_section(data)
    lines, log_info = log_lines(data, mode)
    rl, drawn = rl_charts(data, mode) if kind is RL else ([], set())
    return {
        "v": SCHEMA_VERSION,
        "final": final,
        "live": mode.live,
        "generated_at": now,
        "names": wire_names(),
        "run": status,
        "banners": all_banners(data, status, now),
        "charts": rl
        + training_charts(data, mode, kind, skip=drawn)
        + mfu_charts(data, insights.efficiency, mode)
        + system_charts(data, mode),
        "summary": summary_table(data),
        "markers": discontinuities(data) + anomaly_markers(insights.anomalies),
        "insights": insights_section(data, insights, hourly_cost),
        "baseline": baseline_section(data, baseline, mode, insights.comparison),
        "checkpoints": checkpoint_rows(data, 20 if mode.live else 500),
        "logs": lines,
        "log_info": log_info,
        "failure": data.status.get("failure"),
        "system": system,
        "empty": _empty_reasons(data, system),
        "health": loss_counters(data),
        "gang": gang_section(insights.gang),
        "anatomy": anatomy_section(data, insights.anatomy, mode),
        "profiles": profiles_section(data, mode),
        "completions": completions_section(data, mode) if data.completions.seen else None,
        "agents": agents_section(insights.agents, mode.live),
        "sweep": sweep,
        "stats": {
            "dropped": data.stats.get("dropped", {}),
            "corrupt_segments": data.stats.get("corrupt_segments", 0),
            "segments": data.stats.get("segments", 0),
            "points": data.stats.get("records", 0),
        },
    }
