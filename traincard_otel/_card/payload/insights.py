"""The insights panel (``payload["insights"]``): what needs attention, where the time went, how
well the accelerators are used, and what it costs.

``attention``: the ``traincard.anomaly`` events the converter recorded (step, kind, one-line
explanation), newest last; :func:`anomaly_markers` puts the same on the step charts.
``goodput``: :func:`traincard_otel._insights.goodput.goodput` as seconds per category.
``efficiency``: model FLOPs per token (the adapter's ``flops_per_token`` progress field plus
its attention term times the measured sequence length), achieved FLOP/s and MFU against the peak
the adapter found (``unknown`` with the reason otherwise). ``cost``: from an hourly price per
node, the cost per 1k training tokens and the cost of the non-productive time.
Every field is read defensively: a run without them has an empty panel, never an error.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Final

from ..._insights.flops import mfu
from ..._insights.goodput import CATEGORIES, goodput
from ..._insights.goodput import Goodput as GoodputFigures
from ..._schema import Attr, Event
from ..._store.reader import RunData, Series
from ..._types import JsonValue
from .contract import (
    Anomaly,
    Chart,
    ChartSeries,
    Efficiency,
    Goodput,
    Insights,
    Marker,
    RankEfficiency,
    RunCost,
)
from .series import Mode, xy

MAX_ATTENTION: Final = 50  # the panel lists the newest; the count says how many there were
MAX_MARKERS: Final = 40
RECENT_STEPS: Final = 50
KIND_LABELS: Final = {
    "loss_spike": "loss spike",
    "nonfinite": "NaN/inf",
    "grad_explosion": "grad norm explosion",
    "throughput_drop": "throughput drop",
    "eval_regression": "eval regression",
}
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


def anomalies(data: RunData) -> list[Anomaly]:
    """Every recorded anomaly, oldest first."""
    out: list[Anomaly] = []
    for e in data.events:
        if e.get("name") != Event.ANOMALY:
            continue
        a: Mapping[str, JsonValue] = e.get("attributes") or {}
        kind = str(a.get(Attr.ANOMALY_KIND, ""))
        step = a.get(Attr.STEP)
        out.append(
            {
                "step": step if isinstance(step, int) and step >= 0 else None,
                "kind": kind,
                "label": KIND_LABELS.get(kind, kind),
                "metric": str(a.get(Attr.METRIC_NAME, "")),
                "text": str(e.get("body") or ""),
                "time": e.get("time"),
                "rank": e.get("rank", 0),
                "attempt": e.get("attempt", 0),
            }
        )
    out.sort(key=lambda r: r["time"] or 0.0)
    return out


def anomaly_markers(data: RunData) -> list[Marker]:
    """Vertical lines on the step charts at the newest anomalies (one per step and kind)."""
    seen: dict[tuple[int, str], Marker] = {}
    for a in anomalies(data):
        if a["step"] is not None:
            seen[(a["step"], a["kind"])] = {"x": a["step"], "label": a["label"], "kind": "anomaly"}
    return list(seen.values())[-MAX_MARKERS:]


def _recent_median(series: Series | None) -> float | None:
    if series is None or not len(series):
        return None
    latest = series.attempts[-1]
    values = [
        v
        for v, a in zip(series.values[-RECENT_STEPS:], series.attempts[-RECENT_STEPS:], strict=False)
        if a == latest and v == v
    ]
    return statistics.median(values) if values else None


def efficiency(data: RunData) -> Efficiency | None:
    """Model FLOPs per token, achieved FLOP/s and MFU (None when no adapter reported FLOPs)."""
    progress = data.status.get("progress") or {}
    dense = _number(progress.get("flops_per_token"))
    if not dense:
        return None
    attention = _number(progress.get("attention_flops_per_position")) or 0.0
    peak = _number(progress.get("peak_flops"))
    ranks = sorted(int(k) for k in data.step_times)
    per_rank: list[RankEfficiency] = []
    for rank in ranks:
        tokens = _recent_median(data.throughput.get(f"tokens_per_second{{rank={rank}}}"))
        samples = _recent_median(data.throughput.get(f"samples_per_second{{rank={rank}}}"))
        if not tokens:
            continue
        seq = tokens / samples if samples else None
        per_token = dense + attention * (seq or 0.0)
        achieved = per_token * tokens
        per_rank.append(
            {
                "rank": rank,
                "tokens_per_s": tokens,
                "seq_len": seq,
                "flops_per_token": per_token,
                "achieved_flops": achieved,
                "mfu": mfu(per_token, tokens, peak) if peak else None,
            }
        )
    achieved_total = sum(r["achieved_flops"] or 0.0 for r in per_rank) if per_rank else None
    first = per_rank[0] if per_rank else None
    return {
        "flops_per_token": first["flops_per_token"] if first else dense,
        "seq_len": first["seq_len"] if first else None,
        "achieved_flops": achieved_total,
        "accelerators": len(per_rank),
        "peak_flops": peak,
        "peak_source": str(progress.get("peak_source") or ""),
        "dtype": str(progress.get("compute_dtype") or ""),
        "mfu": achieved_total / (peak * len(per_rank)) if peak and per_rank and achieved_total else None,
        "ranks": per_rank,
    }


def mfu_charts(data: RunData, mode: Mode) -> list[Chart]:
    """An MFU chart by step in percent, per rank (tokens/s x FLOPs per token / peak); none without a
    known peak."""
    e = efficiency(data)
    peak = e["peak_flops"] if e else None
    if not e or not peak or not e["ranks"]:
        return []
    series: list[ChartSeries] = []
    for r in e["ranks"]:
        rates = data.throughput.get(f"tokens_per_second{{rank={r['rank']}}}")
        if rates is None:
            continue
        scale = 100 * (r["flops_per_token"] or 0.0) / peak  # percent
        view = Series(
            name="mfu",
            tags={"rank": str(r["rank"])},
            steps=rates.steps,
            values=[v * scale for v in rates.values],
            times=rates.times,
            attempts=rates.attempts,
            ranks=rates.ranks,
        )
        x, y = xy(view, mode)
        series.append({"label": f"rank {r['rank']}", "x": x, "y": y})
    chart: Chart = {
        "id": "mfu",
        "title": "MFU",
        "group": "training",
        "unit": "%",
        "x": "step",
        "series": series,
    }
    return [chart] if series else []


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


def cost(data: RunData, wall_s: float, badput_s: float | None, hourly: float | None) -> RunCost | None:
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


def _goodput(g: GoodputFigures) -> Goodput:
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


def insights_section(data: RunData, now: float, hourly_cost: float | None = None) -> Insights:
    """The ``insights`` object of the payload (``docs/card-payload.md``)."""
    found = anomalies(data)
    g = goodput(data, now)
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
        "efficiency": efficiency(data),
        "cost": cost(data, wall or 0.0, g.badput_s if g is not None else None, hourly),
    }
