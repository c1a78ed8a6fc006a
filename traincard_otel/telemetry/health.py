"""Health watchdog: stalls, lost ranks, and how the previous attempt ended.

Runs on its own daemon thread, so it keeps working while the training thread is blocked in native
code that releases the GIL (a hung collective, a CUDA sync, a stuck data loader). Everything it
finds becomes an OTel event (so alert rules can fire) and a field of the state (so the card shows
it).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._safety import internal_error
from ..store import layout
from ..store.backends import Backend

Emit = Callable[[str, Mapping[str, Any]], None]

STALL_FACTOR = 20.0  # a step 20x slower than the recent median is not a slow step any more
GPU_IDLE = 0.1
INPUT_BOUND_SHARE = 0.5
NEAR_LIMIT = 0.9


def read_states(backend: Backend) -> list[dict[str, Any]]:
    names = [n for n in backend.list() if (p := layout.parse(n)) is not None and p.kind == "state"]
    out = []
    for raw in backend.read_many(names).values():
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


def previous_attempt_end(states: list[dict[str, Any]], attempt: int) -> dict[str, Any] | None:
    """How attempt ``attempt - 1`` ended: exception, signal, finished, or vanished (killed)."""
    prev = [s for s in states if s.get("attempt") == attempt - 1]
    if not prev:
        return None
    rank0 = min(prev, key=lambda s: s.get("rank", 0))
    failed = next((s for s in prev if s.get("failure")), None)
    info: dict[str, Any] = {"previous_attempt": attempt - 1, "previous_step": rank0.get("step")}
    if failed is not None:
        failure = failed["failure"]
        info.update(
            previous_end="exception",
            exception_type=failure.get("type"),
            verdict=(failure.get("verdict") or {}).get("kind"),
        )
    elif any(s.get("status") == "terminated" for s in prev):
        info.update(
            previous_end="signal",
            signal=next(s.get("terminated_by") for s in prev if s.get("status") == "terminated"),
        )
    elif all(s.get("status") == "finished" for s in prev):
        info.update(previous_end="finished")
    else:
        info.update(previous_end="vanished")
        verdict = host_oom_evidence(rank0.get("last_system") or {})
        if verdict:
            info.update(verdict="host_oom", evidence=verdict)
    return info


def host_oom_evidence(last_system: Mapping[str, Any]) -> str | None:
    """A process that vanished (SIGKILL / exit 137) with memory near its limit: likely the OOM killer."""
    util = last_system.get(
        "system.memory.utilization{system.memory.state=used}", last_system.get("system.memory.utilization")
    )
    rss = last_system.get("process.memory.usage")
    limit = last_system.get("system.memory.limit")
    if (
        isinstance(rss, (int, float))
        and isinstance(limit, (int, float))
        and limit
        and rss / limit >= NEAR_LIMIT
    ):
        return f"process RSS {rss / 2**30:.1f} GiB of a {limit / 2**30:.1f} GiB limit in the last sample"
    if isinstance(util, (int, float)) and util >= NEAR_LIMIT:
        return f"host memory {util:.0%} used in the last sample"
    return None


class Watchdog:
    """Declares stalls, lost ranks and the previous attempt's end; see the module docstring."""

    def __init__(
        self,
        *,
        progress: Callable[[], tuple[int | None, float]],
        recent_step_times: Callable[[], list[float]],
        recent_wait_shares: Callable[[], list[float]],
        gpu_utilization: Callable[[], list[float]],
        emit: Emit,
        backend: Backend | None,
        rank: int,
        world_size: int,
        attempt: int,
        stall_floor_s: float = 60.0,
        rank_timeout_s: float = 120.0,
        period_s: float = 1.0,
        rank_check_s: float = 5.0,
    ) -> None:
        self._progress, self._step_times = progress, recent_step_times
        self._wait_shares, self._gpu_util = recent_wait_shares, gpu_utilization
        self._emit, self._backend = emit, backend
        self.rank, self.world_size, self.attempt = rank, world_size, attempt
        self.stall_floor_s, self.rank_timeout_s = stall_floor_s, rank_timeout_s
        self.period_s, self.rank_check_s = period_s, rank_check_s
        self.stalled_since: float | None = None
        self.stalls = 0
        self.lost_ranks: dict[int, dict[str, Any]] = {}
        self.previous_attempt: dict[str, Any] | None = None
        self._last_step: int | None = None
        self._last_change = time.time()
        self._next_rank_check = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traincard-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 1.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        if self.attempt > 0:
            self._guard("previous attempt", self.check_previous_attempt)
        while not self._stop.wait(self.period_s):
            self._guard("stall check", self.check_stall)
            if self.rank == 0 and self.world_size > 1 and time.time() >= self._next_rank_check:
                self._next_rank_check = time.time() + self.rank_check_s
                self._guard("rank check", self.check_ranks)

    def _guard(self, where: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:
            internal_error(f"watchdog {where}", exc)

    # -- checks ------------------------------------------------------------------------------
    def stall_threshold(self) -> float:
        times = self._step_times()
        derived = STALL_FACTOR * statistics.median(times) if times else 0.0
        return max(self.stall_floor_s, derived)

    def check_stall(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        step, heartbeat = self._progress()
        if step != self._last_step:
            self._last_step, self._last_change = step, now
        if step is None:
            return  # not training yet
        last = max(self._last_change, heartbeat)
        idle = now - last
        if self.stalled_since is None and idle < self.stall_floor_s:
            return  # the threshold is never below the floor: the common case costs nothing more
        threshold = self.stall_threshold()
        gpus = self._gpu_util()
        gpu_busy = bool(gpus) and max(gpus) >= GPU_IDLE
        if self.stalled_since is None and idle >= threshold and not gpu_busy:
            self.stalled_since = last
            self.stalls += 1
            self._emit(
                "traincard.stall.started",
                {
                    "traincard.step": step,
                    "traincard.stall.idle_s": idle,
                    "traincard.stall.threshold_s": threshold,
                },
            )
        elif self.stalled_since is not None and (idle < threshold or gpu_busy):
            self._emit(
                "traincard.stall.cleared",
                {"traincard.step": step, "traincard.stall.duration_s": now - self.stalled_since},
            )
            self.stalled_since = None

    def input_bound_share(self) -> float | None:
        """The median share of recent steps spent waiting for data, if it marks input-bound training."""
        shares = self._wait_shares()
        share = statistics.median(shares) if shares else None
        return share if share is not None and share >= INPUT_BOUND_SHARE else None

    def check_ranks(self, now: float | None = None) -> None:
        if self._backend is None:
            return
        now = time.time() if now is None else now
        latest: dict[int, dict[str, Any]] = {}
        for s in read_states(self._backend):
            if s.get("attempt") != self.attempt or s.get("rank") == self.rank:
                continue
            r = int(s.get("rank", 0))
            if r not in latest or (s.get("started_at") or 0) > (latest[r].get("started_at") or 0):
                latest[r] = s
        for r, s in latest.items():
            age = now - float(s.get("heartbeat_at") or 0)
            lost = s.get("status") == "running" and age > self.rank_timeout_s
            if lost and r not in self.lost_ranks:
                info = {
                    "rank": r,
                    "host": s.get("host"),
                    "heartbeat_at": s.get("heartbeat_at"),
                    "step": s.get("step"),
                }
                self.lost_ranks[r] = info
                self._emit(
                    "traincard.rank.lost",
                    {
                        "traincard.lost_rank": r,
                        "host.name": str(s.get("host")),
                        "traincard.step": s.get("step") or -1,
                        "traincard.heartbeat_age_s": age,
                    },
                )
            elif not lost and r in self.lost_ranks:
                del self.lost_ranks[r]
                self._emit("traincard.rank.recovered", {"traincard.lost_rank": r})

    def check_previous_attempt(self) -> None:
        if self._backend is None:
            return
        info = previous_attempt_end(read_states(self._backend), self.attempt)
        if info is None:
            return
        self.previous_attempt = info
        self._emit("traincard.run.resumed", {f"traincard.{k}": v for k, v in info.items() if v is not None})

    def status_fields(self) -> dict[str, Any]:
        return {
            "stalled": self.stalled_since is not None,
            "stalled_since": self.stalled_since,
            "stalls": self.stalls,
            "input_bound_share": self.input_bound_share(),
            "lost_ranks": list(self.lost_ranks.values()),
            "previous_attempt": self.previous_attempt,
        }


# -- a whole gang, from what every rank and node wrote (pure; used by the card and the CLI) ------

STRAGGLER_FACTOR = 1.2  # a rank whose recent median step time is >= 1.2x the other ranks' median
STRAGGLER_MIN_STEPS = 5  # ... over at least this many steps, is named as the slowest
RECENT_STEPS = 20


def _latest_attempt_values(series: Any) -> list[float]:
    attempts = series.attempts
    if not attempts:
        return []
    latest = attempts[-1]
    start = 0 if attempts[0] == latest else attempts.index(latest)
    return [v for v in series.values[start:] if v == v]


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    try:
        import numpy as np
    except ImportError:
        return float(statistics.median(values))
    return float(np.median(np.asarray(values, dtype=float)))


def rank_table(data: Any, now: float) -> list[dict[str, Any]]:
    """One row per training rank of the latest attempt: where it runs, how far it got, its step
    time (median over the attempt and over the last ``RECENT_STEPS``) and its data-wait share."""
    if not data.states:
        return []
    latest = max(int(s.get("attempt", 0)) for s in data.states)
    by_rank: dict[int, dict[str, Any]] = {}
    for s in data.states:
        if int(s.get("attempt", 0)) != latest:
            continue
        r = int(s.get("rank", 0))
        if r not in by_rank or (s.get("started_at") or 0) >= (by_rank[r].get("started_at") or 0):
            by_rank[r] = s
    rows = []
    for r, s in sorted(by_rank.items()):
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
                "last_system": s.get("last_system") or {},
            }
        )
    return rows


def stragglers(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The spread of recent step times across ranks, and the slowest rank when it is at least
    ``STRAGGLER_FACTOR`` times the median of the others (over ``STRAGGLER_MIN_STEPS`` steps)."""
    timed = [
        r for r in rows if r["step_time_recent_s"] is not None and r["steps_timed"] >= STRAGGLER_MIN_STEPS
    ]
    out: dict[str, Any] = {"factor": STRAGGLER_FACTOR, "spread": None, "slowest": None}
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


def hung_ranks(rows: list[dict[str, Any]], now: float, ended: set[int]) -> list[dict[str, Any]]:
    """Ranks still marked running whose heartbeat is older than their rank timeout, and that no
    agent record says have ended: alive as far as anyone knows, but not progressing."""
    out = []
    for r in rows:
        age = r["heartbeat_age_s"]
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
