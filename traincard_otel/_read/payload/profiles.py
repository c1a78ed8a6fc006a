"""The Profiles section (``payload["profiles"]``): every ``torch.profiler`` capture of the run.

Per capture: when it was asked and what asked for it (``traincard profile``, or the ``profile_on``
kind that triggered it and what it saw), the steps it recorded, and per rank the profiler's own
cost, the breakdown of the profiled time, the top operators by self time (the device's on a GPU)
and where its trace is, with the command that copies it out for Perfetto. Read as the store holds
it (:mod:`traincard_otel._read.load.profiles`); nothing is computed here but the layout.
"""

from __future__ import annotations

from typing import Final

from ..._data.rundata import RunData
from ..._types import JsonObject, JsonValue
from .contract import ProfileCaptureRow, ProfileOperatorRow, ProfileRankRow, ProfilesSection
from .series import Mode

MAX_CAPTURES: Final = 20  # newest first; a live update carries fewer
LIVE_CAPTURES: Final = 3
TOP: Final = 8  # operators per rank shown
MAX_RANKS: Final = 8  # ranks shown per capture (a gang's first ones; the count says how many)
LIVE_RANKS: Final = 2  # ... in a live update, which must stay small


def _number(value: JsonValue) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _operators(summary: JsonObject, device: bool) -> list[ProfileOperatorRow]:
    ops = summary.get("operators") or {}
    rows = ops.get("device" if device else "host") or []
    key = "self_device_ms" if device else "self_cpu_ms"
    total = _number(ops.get("device_total_ms" if device else "host_total_ms")) or 0.0
    out: list[ProfileOperatorRow] = []
    for row in rows[:TOP]:
        ms = _number(row.get(key)) or 0.0
        out.append(
            {
                "name": str(row.get("name", "")),
                "calls": int(row.get("calls") or 0),
                "self_ms": ms,
                "share": ms / total if total > 0 else None,
            }
        )
    return out


def _rank(rank: int, s: JsonObject) -> ProfileRankRow:
    b = s.get("breakdown") or {}
    device = bool(b.get("device"))
    cost = s.get("cost") or {}
    return {
        "rank": rank,
        "steps": s.get("steps"),
        "device": device,
        "shares": {str(k): float(v) for k, v in (b.get("shares") or {}).items() if _number(v) is not None},
        "span_s": _number(b.get("span_s")),
        "overlap": _number(b.get("overlap")),
        "operators": _operators(s, device),
        "overhead": _number(cost.get("overhead")),
        "start_s": _number(cost.get("start_s")),
        "stop_s": _number(cost.get("stop_s")),
        "step_before_s": _number(cost.get("step_before_s")),
        "step_during_s": _number(cost.get("step_during_s")),
        "trace": str(s.get("trace") or ""),
        "location": str(s.get("trace_location") or ""),
        "trace_bytes": int(s.get("trace_bytes") or 0),
        "events_cut": int(s.get("trace_events_cut") or 0),
    }


def profiles_section(data: RunData, mode: Mode) -> ProfilesSection | None:
    """The section, or None when the run has no capture."""
    if not data.profiles:
        return None
    shown = list(reversed(data.profiles))[: LIVE_CAPTURES if mode.live else MAX_CAPTURES]
    per_capture = LIVE_RANKS if mode.live else MAX_RANKS
    captures: list[ProfileCaptureRow] = []
    for c in shown:
        ranks = c.get("ranks") or {}
        store = c.get("store") or data.source
        captures.append(
            {
                "id": str(c["id"]),
                "trigger": str(c.get("trigger") or "request"),
                "detail": str(c.get("detail") or ""),
                "asked_at": _number(c.get("asked_at")),
                "steps": c.get("steps"),
                "rank_count": len(ranks),
                "ranks": [_rank(int(r), ranks[r]) for r in sorted(ranks)[:per_capture]],
                "export": f"traincard export {store} --profile {c['id']} -o trace.json.gz",
            }
        )
    return {"captures": captures, "total": len(data.profiles)}
