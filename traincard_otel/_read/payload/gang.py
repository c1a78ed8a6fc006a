"""The card's gang section: nodes, ranks, stragglers, the first failure and hung ranks.

Pure (no Metaflow, no I/O): the analysis is :func:`traincard_otel._analysis.gang.attribution.analyze`,
run once per read by :func:`traincard_otel._analysis.analysis.analyse`; this adds the headline
lines the panel starts with.
``card.js`` draws the section in the gang panel.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..._types import JsonObject

if TYPE_CHECKING:  # the payload package imports this module
    from .contract import BannerRow, GangSection, StacksSection


def gang_section(diagnosis: JsonObject | None) -> GangSection | None:
    """The gang panel's data (the analysis's ``Insights.gang``); ``None`` for a run with one rank
    and no gang."""
    if diagnosis is None:
        return None
    return {
        "world_size": diagnosis["world_size"],
        "num_nodes": diagnosis["num_nodes"],
        "nodes": diagnosis["nodes"],
        "ranks": diagnosis["ranks"],
        "stragglers": diagnosis["stragglers"],
        "first_failure": diagnosis["first_failure"],
        "hung": diagnosis["hung"],
        "waiting": diagnosis["waiting"],
        "waits": diagnosis["waits"],
        "aggregates": diagnosis["aggregates"],
        "failure": diagnosis.get("failure"),
        "headline": headline(diagnosis),
        "stacks": _stacks(diagnosis.get("stacks")),
    }


def _stacks(located: JsonObject | None) -> StacksSection | None:
    if not located:
        return None
    return {
        "groups": located["groups"],
        "summary": located["summary"],
        "culprits": located["culprits"],
        "waiting": located["waiting"],
        "collective": located["collective"],
        "flight_recorder": located["flight_recorder"],
    }


def _clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "never"


def headline(section: JsonObject) -> list[BannerRow]:
    """BannerRow lines for the gang: the first failure, hung ranks, the slowest rank, barrier waits."""
    out: list[BannerRow] = []
    first = section.get("first_failure")
    if first is not None:
        text = (
            f"First failure: rank {first['rank']} on node {first['node']} ({first.get('host') or '?'}, "
            f"pid {first.get('pid')}) {first.get('how')} at step {first.get('step')}, "
            f"last heartbeat {_clock(first.get('heartbeat_at'))}"
        )
        later = first.get("consequences") or []
        if later:
            text += "; then " + "; ".join(f"rank {c['rank']} {c['how']}" for c in later[:8])
        out.append({"kind": "failed", "text": text})
    told = {first["rank"], *(c["rank"] for c in first.get("consequences") or [])} if first else set()
    for h in section.get("hung") or []:
        if h["rank"] in told:
            continue
        out.append(
            {
                "kind": "degraded",
                "text": f"Rank {h['rank']} on node {h['node']} is hung: no heartbeat for {h['age_s']:.0f} s "
                f"(last step {h['step']})",
            }
        )
    found = (section.get("stragglers") or {}).get("anatomy")
    slow = (section.get("stragglers") or {}).get("slowest")
    if found is not None:  # the step anatomy says which part makes it slow
        text = str(found["text"])
        out.append({"kind": "info", "text": f"{text[:1].upper()}{text[1:]}"})
    elif slow is not None:
        out.append(
            {
                "kind": "info",
                "text": f"Straggler: rank {slow['rank']} on node {slow['node']} takes {slow['ratio']:.1f}x "
                f"the other ranks' step time ({slow['recent_s']:.3g} s vs {slow['others_s']:.3g} s)",
            }
        )
    out.extend({"kind": "info", "text": w} for w in section.get("waits") or [])
    located = section.get("stacks")
    if located:
        kind = "failed" if located.get("culprits") else "info"
        out.append({"kind": kind, "text": f"Where each rank is: {located['summary']}"})
        recorded = located.get("flight_recorder")
        if recorded and recorded["not_joined"]:
            out.append({"kind": kind, "text": f"Flight recorder: {recorded['text']}"})
    return out
