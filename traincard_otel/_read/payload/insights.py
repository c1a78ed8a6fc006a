"""The insights panel (``payload["insights"]``): what needs attention, where the time went, how
well the accelerators are used, and what it costs.

Everything here draws the run's analysis (:class:`traincard_otel._analysis.analysis.Insights`).
``attention``: the ``traincard.anomaly`` events the converter recorded (step, kind, one-line
explanation), newest last; :func:`anomaly_markers` puts the same on the step charts.
``goodput``: :func:`traincard_otel._analysis.goodput.goodput` as seconds per category.
``efficiency``: :func:`traincard_otel._analysis.efficiency.efficiency` (model FLOPs per token,
achieved FLOP/s and MFU against the peak the adapter found); ``mfu_hint``: where a training run
has no efficiency for want of the model's FLOPs per token (a hand-written loop instrumented
without ``model=``), how to get it. ``cost``: from an hourly price per node, the cost per 1k
training tokens and the cost of the non-productive time.
Every field is read defensively: a run without them has an empty panel, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..._analysis.analysis import Insights, RecordedAnomaly
from ..._analysis.efficiency import Efficiency
from ..._analysis.goodput import CATEGORIES, Goodput
from ..._data.rundata import RunData, Series
from ..._schema import ANOMALY_KINDS, CRITICAL_ANOMALY_KINDS
from .contract import (
    AnomalyRow,
    ChartRow,
    ChartSeriesRow,
    CostSection,
    EfficiencySection,
    GoodputSection,
    InsightsSection,
    MarkerRow,
    RankEfficiencyRow,
)
from .series import Mode, xy

MAX_ATTENTION: Final = 50  # the panel lists the newest; the count says how many there were
MAX_MARKERS: Final = 40
KIND_LABELS: Final = {k.name: k.label for k in ANOMALY_KINDS}
CATEGORY_LABELS: Final = {
    "productive": "productive steps",
    "data_wait": "data wait",
    "startup": "start-up",
    "eval": "evaluation",
    "checkpoint": "checkpoints",
    "stall": "stalls",
    "restart": "restart loss",
    "shutdown": "shutdown",
    "other": "other",
}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def _attention(a: RecordedAnomaly) -> AnomalyRow:
    return {
        "step": a.step,
        "kind": a.kind,
        "label": KIND_LABELS.get(a.kind, a.kind),
        "critical": a.kind in CRITICAL_ANOMALY_KINDS,
        "metric": a.metric,
        "text": a.text,
        "time": a.time,
        "rank": a.rank,
        "attempt": a.attempt,
    }


def anomaly_markers(found: Sequence[RecordedAnomaly]) -> list[MarkerRow]:
    """Vertical lines on the step charts at the newest anomalies (one per step and kind)."""
    seen: dict[tuple[int, str], MarkerRow] = {}
    for a in found:
        if a.step is not None:
            label = KIND_LABELS.get(a.kind, a.kind)
            seen[(a.step, a.kind)] = {"x": a.step, "label": label, "kind": "anomaly"}
    return list(seen.values())[-MAX_MARKERS:]


def mfu_charts(data: RunData, e: Efficiency | None, mode: Mode) -> list[ChartRow]:
    """An MFU chart by step in percent, per rank (tokens/s x FLOPs per token / peak); none without a
    known peak."""
    peak = e.peak_flops if e else None
    if not e or not peak or not e.ranks:
        return []
    series: list[ChartSeriesRow] = []
    for r in e.ranks:
        rates = data.throughput.get(f"tokens_per_second{{rank={r.rank}}}")
        if rates is None:
            continue
        scale = 100 * r.flops_per_token / peak  # percent
        view = Series(
            name="mfu",
            tags={"rank": str(r.rank)},
            steps=rates.steps,
            values=[v * scale for v in rates.values],
            times=rates.times,
            attempts=rates.attempts,
            ranks=rates.ranks,
        )
        x, y = xy(view, mode)
        series.append({"label": f"rank {r.rank}", "x": x, "y": y})
    chart: ChartRow = {
        "id": "mfu",
        "title": "MFU",
        "group": "training",
        "unit": "%",
        "x": "step",
        "series": series,
    }
    return [chart] if series else []


MFU_HINT: Final = (
    "MFU is not shown: the model's FLOPs per token are not known. Hand the model over, "
    "instrument(optimizer, model=model) (or instrument(accelerator, model=model)), or report them: "
    "reporter.progress(flops_per_token=..., peak_flops=...), the FLOPs of training on one token "
    "(about 6 x the parameters for a dense model) and one accelerator's peak FLOP/s."
)
MFU_TOKENS_HINT: Final = (
    " MFU also needs the tokens of each step: tracker.log(batch=batch) or "
    "reporter.step_end(step, tokens=...)."
)


def mfu_hint(data: RunData) -> str | None:
    """How to get MFU, where a run timed training steps (an evaluation or inference loop times
    none) but no one reported its model's FLOPs per token."""
    progress = data.status.get("progress") or {}
    if _number(progress.get("flops_per_token")) or not any(len(s) for s in data.step_times.values()):
        return None
    tokens = any(len(s) for k, s in data.throughput.items() if k.startswith("tokens_per_second"))
    return MFU_HINT if tokens else MFU_HINT + MFU_TOKENS_HINT


def _tokens(data: RunData) -> float:
    """Training tokens of every rank: each timed step's rate times its duration."""
    total = 0.0
    for rank, steps in data.step_times.items():
        rates = data.throughput.get(f"tokens_per_second{{rank={rank}}}")
        if rates is None:
            continue
        duration = dict(zip(steps.times, steps.values, strict=False))
        total += sum(r * duration.get(t, 0.0) for t, r in zip(rates.times, rates.values, strict=False))
    return total


def cost(data: RunData, wall_s: float, badput_s: float | None, hourly: float | None) -> CostSection | None:
    """Cost so far for ``wall_s`` at ``hourly`` per node, per 1k training tokens, and of badput."""
    if not hourly:
        return None
    nodes = max(len(data.gang.get("nodes") or []), 1)
    so_far = hourly * nodes * wall_s / 3600
    tokens = _tokens(data)
    return {
        "hourly": hourly,
        "nodes": nodes,
        "so_far": so_far,
        "tokens": tokens,
        "per_1k_tokens": so_far / (tokens / 1000) if tokens else None,
        "badput": hourly * nodes * badput_s / 3600 if badput_s is not None else None,
    }


def _goodput(g: Goodput) -> GoodputSection:
    return {
        "wall_s": g.wall_s,
        "seconds": dict(g.seconds),
        "ratio": g.ratio,
        "badput_s": g.badput_s,
        "rank": g.rank,
        "attempts": g.attempts,
        "running": g.running,
        "categories": [{"key": k, "label": CATEGORY_LABELS[k], "seconds": g.seconds[k]} for k in CATEGORIES],
    }


def _efficiency(e: Efficiency) -> EfficiencySection:
    ranks: list[RankEfficiencyRow] = [
        {
            "rank": r.rank,
            "tokens_per_s": r.tokens_per_s,
            "seq_len": r.seq_len,
            "flops_per_token": r.flops_per_token,
            "achieved_flops": r.achieved_flops,
            "mfu": r.mfu,
        }
        for r in e.ranks
    ]
    return {
        "flops_per_token": e.flops_per_token,
        "seq_len": e.seq_len,
        "achieved_flops": e.achieved_flops,
        "accelerators": e.accelerators,
        "peak_flops": e.peak_flops,
        "peak_source": e.peak_source,
        "dtype": e.dtype,
        "mfu": e.mfu,
        "ranks": ranks,
    }


def insights_section(data: RunData, insights: Insights, hourly_cost: float | None = None) -> InsightsSection:
    """The ``insights`` object of the payload (``docs/card-payload.md``), from the run's analysis."""
    found = [_attention(a) for a in insights.anomalies]
    g, now = insights.goodput, insights.now
    status = data.status
    hourly = _number(status.get("hourly_cost")) or hourly_cost
    wall = g.wall_s if g is not None else None
    if wall is None and data.states:
        started = min((_number(s.get("started_at")) or now for s in data.states), default=now)
        wall = (
            now
            if status.get("status") == "running"
            else max((_number(s.get("updated_at")) or started for s in data.states), default=now)
        ) - started
    return {
        "attention": found[-MAX_ATTENTION:],
        "attention_total": len(found),
        "goodput": None if g is None else _goodput(g),
        "efficiency": _efficiency(insights.efficiency) if insights.efficiency else None,
        "mfu_hint": mfu_hint(data),
        "cost": cost(data, wall or 0.0, g.badput_s if g is not None else None, hourly),
    }
