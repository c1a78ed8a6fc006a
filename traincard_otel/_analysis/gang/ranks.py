"""One row per training rank of a gang, the spread of step time across ranks (the slowest named
at ``STRAGGLER_FACTOR``), and the ranks that are hung (heartbeat older than the rank timeout while
nothing says they ended). Pure functions of what the ranks stored."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..._types import JsonObject

STRAGGLER_FACTOR = 1.2  # a rank whose recent median step time is >= 1.2x the other ranks' median
STRAGGLER_MIN_STEPS = 5  # ... over at least this many steps, is named as the slowest
RECENT_STEPS = 20

if TYPE_CHECKING:
    from ..._data.rundata import RunData, Series


def _latest_attempt_values(series: Series) -> Sequence[float]:
    """The set values of the series' latest attempt (a slice of its column: no copy per value
    unless a value is missing)."""
    attempts = series.attempts
    if not attempts:
        return []
    latest = attempts[-1]
    start = 0 if attempts[0] == latest else attempts.index(latest)
    values = series.values[start:]
    total = sum(values)
    if total == total:  # no NaN (a C-speed scan)
        return values
    return [v for v in values if v == v]


def _median(values: Sequence[float]) -> float | None:
    if not len(values):
        return None
    try:
        import numpy as np
    except ImportError:
        return float(statistics.median(values))
    return float(np.median(np.asarray(values, dtype=float)))  # an array('d') is read in place


def latest_states(data: RunData) -> dict[int, JsonObject]:
    """Each rank's state in the latest attempt (its latest process's), by rank."""
    if not data.states:
        return {}
    latest = max(int(s.get("attempt", 0)) for s in data.states)
    by_rank: dict[int, JsonObject] = {}
    for s in data.states:
        if int(s.get("attempt", 0)) != latest:
            continue
        r = int(s.get("rank", 0))
        if r not in by_rank or (s.get("started_at") or 0) >= (by_rank[r].get("started_at") or 0):
            by_rank[r] = s
    return by_rank


def rank_table(data: RunData, now: float) -> list[JsonObject]:
    """One row per training rank of the latest attempt: where it runs, how far it got, its step
    time (median over the attempt and over the last ``RECENT_STEPS``) and its data-wait share."""
    rows = []
    for r, s in sorted(latest_states(data).items()):
        durations = _latest_attempt_values(data.step_times[r]) if r in data.step_times else []
        waits = _latest_attempt_values(data.data_wait[r]) if r in data.data_wait else []
        total_d, total_w = sum(durations[-RECENT_STEPS:]), sum(waits[-RECENT_STEPS:])
        beat = float(s.get("heartbeat_at") or s.get("updated_at") or 0)
        rows.append(
            {
                "rank": r,
                "node": s.get("node_index", s.get("node_rank", 0)),
                "local_rank": s.get("local_rank"),
                "host": s.get("host"),
                "pid": s.get("pid"),
                "status": s.get("status", "unknown"),
                "step": s.get("step"),
                "heartbeat_at": beat or None,
                "heartbeat_age_s": now - beat if beat else None,
                "updated_at": s.get("updated_at"),
                "step_time_median_s": _median(durations),
                "step_time_recent_s": _median(durations[-RECENT_STEPS:]),
                "steps_timed": len(durations),
                # data wait is part of the step: its share of the recent steps' time
                "data_wait_share": total_w / total_d if waits and total_d > 0 else None,
                "failure": s.get("failure"),
                "terminated_by": s.get("terminated_by"),
                "rank_timeout_s": float(s.get("rank_timeout_s") or 120.0),
                "flush_interval_s": float(s.get("flush_interval_s") or 2.0),
                "last_system": s.get("last_system") or {},
                "stacks": s.get("stacks"),
            }
        )
    return rows


def stragglers(rows: list[JsonObject]) -> JsonObject:
    """The spread of recent step times across ranks, and the slowest rank when it is at least
    ``STRAGGLER_FACTOR`` times the median of the others (over ``STRAGGLER_MIN_STEPS`` steps)."""
    timed = [
        r for r in rows if r["step_time_recent_s"] is not None and r["steps_timed"] >= STRAGGLER_MIN_STEPS
    ]
    out: JsonObject = {"factor": STRAGGLER_FACTOR, "spread": None, "slowest": None}
    if len(timed) < 2:
        return out
    recent = [r["step_time_recent_s"] for r in timed]
    mid = _median(recent) or 0.0
    out["median_s"] = mid
    out["spread"] = (max(recent) - min(recent)) / mid if mid > 0 else None
    slow = max(timed, key=lambda r: r["step_time_recent_s"])
    others = _median([r["step_time_recent_s"] for r in timed if r is not slow]) or 0.0
    if others > 0 and slow["step_time_recent_s"] >= STRAGGLER_FACTOR * others:
        out["slowest"] = {
            "rank": slow["rank"],
            "node": slow["node"],
            "host": slow["host"],
            "recent_s": slow["step_time_recent_s"],
            "others_s": others,
            "ratio": slow["step_time_recent_s"] / others,
        }
    return out


def hung_ranks(rows: list[JsonObject], now: float, ended: set[int]) -> list[JsonObject]:
    """Ranks still marked running whose heartbeat is older than their rank timeout, and that no
    agent record says have ended: alive as far as anyone knows, but not progressing. A rank that
    has not finished a step yet (rendezvous, first compile) is not hung."""
    out = []
    for r in rows:
        age = r["heartbeat_age_s"]
        if r["step"] is None:
            continue
        if (
            r["status"] == "running"
            and r["rank"] not in ended
            and age is not None
            and age > r["rank_timeout_s"]
        ):
            out.append(
                {**{k: r[k] for k in ("rank", "node", "host", "pid", "step", "heartbeat_at")}, "age_s": age}
            )
    return out
