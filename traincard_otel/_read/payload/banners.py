"""The banners above the card: failure, termination, stall, lost ranks, resume, data loss."""

from __future__ import annotations

import time

from ..._data.rundata import RunData
from ..._types import JsonObject
from .contract import BannerRow, RunSection
from .health import store_health_banner


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def _clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "never"


def lost_ranks(data: RunData, now: float | None = None) -> list[JsonObject]:
    """Ranks of the latest attempt still marked running whose heartbeat is older than the timeout.

    Computed from the states at render time too, so a lost rank is named even when rank 0 (which
    also watches) is the one that died. A rank that finished normally is never lost.
    """
    now = time.time() if now is None else now
    st = data.status
    found = {int(r["rank"]): r for r in st.get("lost_ranks") or []}
    ranks = st.get("ranks") or {}
    if len(ranks) > 1:
        timeout = float(st.get("rank_timeout_s") or 120.0)
        for rank, s in ranks.items():
            beat = s.get("heartbeat_at") or 0
            if s.get("status") == "running" and now - beat > timeout and int(rank) not in found:
                found[int(rank)] = {
                    "rank": int(rank),
                    "host": s.get("host"),
                    "heartbeat_at": beat,
                    "step": s.get("step"),
                }
    return [found[r] for r in sorted(found)]


def _resumed_text(data: RunData, status: RunSection) -> str:
    text = f"Attempt {status['attempt']}: restarted {status['restarts']} time(s); earlier attempts are kept"
    prev = data.status.get("previous_attempt") or {}
    end = prev.get("previous_end")
    if end == "exception":
        text += f". Attempt {prev.get('previous_attempt')} ended with {prev.get('exception_type')}"
    elif end == "signal":
        text += f". Attempt {prev.get('previous_attempt')} was terminated by {prev.get('signal')}"
    elif end == "vanished":
        text += f". Attempt {prev.get('previous_attempt')} vanished (killed, e.g. SIGKILL / exit 137)"
        if prev.get("verdict") == "host_oom":
            text += f" — likely host out of memory: {prev.get('evidence')}"
    if end and prev.get("previous_step") is not None:
        text += f" at step {prev['previous_step']}"
    return text


def _run_banners(data: RunData, status: RunSection, now: float) -> list[BannerRow]:
    out: list[BannerRow] = []
    st = data.status
    failure = st.get("failure")
    if failure:
        verdict = (failure.get("verdict") or {}).get("text")
        text = f"Training failed: {failure.get('type')}: {str(failure.get('message', ''))[:300]}"
        out.append({"kind": "failed", "text": text + (f" — {verdict}" if verdict else "")})
    if st.get("status") == "terminated":
        by = st.get("terminated_by") or "a signal"
        out.append({"kind": "terminated", "text": f"Terminated by {by} at step {status.get('step')}"})
    if st.get("stalled"):
        since = st.get("stalled_since")
        ago = f" for {_duration(now - since)}" if since else ""
        out.append(
            {"kind": "stalled", "text": f"Stalled{ago}: no step progress since step {status.get('step')}"}
        )
    lost = lost_ranks(data, now)
    if lost:
        names = "; ".join(
            f"rank {r['rank']} on {r.get('host') or '?'} (last heartbeat {_clock(r.get('heartbeat_at'))}, "
            f"step {r.get('step')})"
            for r in lost
        )
        out.append(
            {"kind": "degraded", "text": f"Degraded: {len(lost)} rank(s) stopped heart-beating: {names}"}
        )
    if status["restarts"]:
        out.append({"kind": "resumed", "text": _resumed_text(data, status)})
    return out


def _guard_banners(data: RunData) -> list[BannerRow]:
    """The armed guard rails (``stop_on``, ``notify``) and each action they took, with when."""
    guards = data.status.get("guards")
    if not guards:
        return []
    out: list[BannerRow] = []
    trigger = guards.get("trigger")
    if data.status.get("status") == "stopped_early" and trigger:
        where = (
            f"; checkpoint {guards['checkpoint']}" if guards.get("checkpoint") else "; no checkpoint saved"
        )
        text = (
            f"Stopped early by stop_on={trigger['kind']} (step {trigger.get('step')}): {trigger['message']}"
        )
        out.append({"kind": "stopped_early", "text": text + where})
    armed = []
    if guards.get("stop_on"):
        armed.append("stop on " + ", ".join(guards["stop_on"]))
    sent: JsonObject | None = guards.get("notifications")
    if sent:
        kinds = ", ".join(guards.get("notify_on") or []) or "every kind"
        armed.append(
            f"notify {sent['webhooks']} webhook(s) of {kinds}: {sent['sent']} sent, {sent['failed']} failed, "
            f"{sent['suppressed']} rate-limited, {sent['dropped']} dropped"
        )
    if armed:
        out.append({"kind": "guards", "text": "Armed: " + "; ".join(armed)})
    for a in guards.get("actions") or []:
        text = f"{str(a['action']).capitalize()} at {_clock(a.get('time'))} (step {a.get('step')})"
        out.append({"kind": "guards", "text": f"{text}, triggered by {a.get('trigger')}: {a.get('detail')}"})
    return out


def _data_banners(data: RunData, status: RunSection, now: float) -> list[BannerRow]:
    out: list[BannerRow] = []
    share = data.status.get("input_bound_share")
    if share:
        out.append(
            {"kind": "info", "text": f"Input-bound: {share:.0%} of step time is spent waiting for data"}
        )
    dropped = sum(data.stats.get("dropped", {}).values())
    if dropped:
        out.append(
            {"kind": "dropped", "text": f"{dropped} telemetry records were dropped: {data.stats['dropped']}"}
        )
    health = store_health_banner(data, now if status.get("status") == "running" else status["updated_at"])
    if health:
        out.append(health)
    if data.stats.get("corrupt_segments"):
        out.append(
            {"kind": "info", "text": f"{data.stats['corrupt_segments']} unreadable store segment(s) skipped"}
        )
    for note in dict.fromkeys(s["compaction_note"] for s in data.states if s.get("compaction_note")):
        text = f"{note[:1].upper()}{note[1:]}; the store keeps its segments instead, nothing is lost"
        out.append({"kind": "info", "text": text})
    return out


def all_banners(data: RunData, status: RunSection, now: float | None = None) -> list[BannerRow]:
    """Every banner that applies, in the order the run's story reads (the page sorts by severity)."""
    now = time.time() if now is None else now
    return _run_banners(data, status, now) + _guard_banners(data) + _data_banners(data, status, now)
