"""Health watchdog: stalls, lost ranks, how the previous attempt ended, and (on a gang's control
node) the gang's failed and hung ranks.

``host_oom_evidence`` and the gang-wide analysis live in :mod:`traincard_otel._analysis.gang`; the
reader applies them to every gang it reads, and the control node's watchdog to the gang's rank
states as they come (:mod:`.gang_watch`, checked on the rank check's schedule).

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
from collections.abc import Callable

from ..._analysis.gang.attribution import host_oom_evidence
from ..._safety import internal_error
from ..._schema import Attr, Event, StatusSection
from ..._store import layout, requests
from ..._store.backends import Backend, read_small
from ..._types import JsonObject
from .stack_watch import REQUEST_POLL_S, Emit, StackWatch

STALL_FACTOR = 20.0  # a step 20x slower than the recent median is not a slow step any more
GPU_IDLE = 0.1
INPUT_BOUND_SHARE = 0.5
STACK_REFRESH_MAX_S = 30.0  # while a stall lasts, the stacks are read again at most this long apart


def read_states(backend: Backend) -> list[JsonObject]:
    names = [n for n in backend.list() if (p := layout.parse(n)) is not None and p.kind == "state"]
    out = []
    for raw in read_small(backend, names).values():
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


# The keys of :func:`previous_attempt_end` as attributes of the ``traincard.run.resumed`` event.
_RESUMED_ATTRS = {
    "previous_attempt": Attr.PREVIOUS_ATTEMPT,
    "previous_step": Attr.PREVIOUS_STEP,
    "previous_end": Attr.PREVIOUS_END,
    "exception_type": Attr.PREVIOUS_EXCEPTION_TYPE,
    "verdict": Attr.PREVIOUS_VERDICT,
    "evidence": Attr.PREVIOUS_EVIDENCE,
    "signal": Attr.SIGNAL,
}


def previous_attempt_end(states: list[JsonObject], attempt: int) -> JsonObject | None:
    """How attempt ``attempt - 1`` ended: exception, signal, finished, or vanished (killed)."""
    prev = [s for s in states if s.get("attempt") == attempt - 1]
    if not prev:
        return None
    rank0 = min(prev, key=lambda s: s.get("rank", 0))
    failed = next((s for s in prev if s.get("failure")), None)
    info: JsonObject = {"previous_attempt": attempt - 1, "previous_step": rank0.get("step")}
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
    elif all(s.get("status") in ("finished", "stopped_early") for s in prev):
        info.update(previous_end="finished")
    else:
        info.update(previous_end="vanished")
        verdict = host_oom_evidence(rank0.get("last_system") or {})
        if verdict:
            info.update(verdict="host_oom", evidence=verdict)
    return info


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
        host: str = "",
        stall_floor_s: float = 60.0,
        rank_timeout_s: float = 120.0,
        period_s: float = 1.0,
        rank_check_s: float = 5.0,
        gang_check: Callable[[], object] | None = None,
        on_profile_request: Callable[[object], None] | None = None,
        on_states: Callable[[list[JsonObject]], None] | None = None,
    ) -> None:
        """``gang_check``: the control node's look at its gang (:class:`.gang_watch.GangWatch`);
        ``on_profile_request``: given the requests' ``profile`` entry at each poll that finds one;
        ``on_states``: given every rank's state at each of rank 0's rank checks (``profile_on``'s
        straggler check)."""
        self._progress, self._step_times = progress, recent_step_times
        self._wait_shares, self._gpu_util = recent_wait_shares, gpu_utilization
        self._emit, self._backend = emit, backend
        self.rank, self.world_size, self.attempt, self.host = rank, world_size, attempt, host
        self.stall_floor_s, self.rank_timeout_s = stall_floor_s, rank_timeout_s
        self.period_s, self.rank_check_s = period_s, rank_check_s
        self._gang_check = gang_check
        self.stalled_since: float | None = None
        self.stalls = 0
        self.lost_ranks: dict[int, JsonObject] = {}
        self.previous_attempt: JsonObject | None = None
        self.where = StackWatch(emit, rank, host)
        self.on_profile_request, self.on_states = on_profile_request, on_states
        self._next_dump = 0.0
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
                if self._gang_check is not None:
                    self._guard("gang check", self._gang_check)
            self.where.forget_answer(time.time())
            if self._backend is not None and time.time() >= self.where.next_request_check:
                self.where.next_request_check = time.time() + REQUEST_POLL_S
                self._guard("requests", self.check_requests)

    def check_requests(self, now: float | None = None) -> None:
        """Answer what the store asks this rank (one read: stacks, a profile)."""
        if self._backend is None:
            return
        asked = requests.read(self._backend)
        if not asked:
            return
        self.where.answer(asked.get("stacks"), stalled=self.stalled_since is not None, now=now)
        if self.on_profile_request is not None and "profile" in asked:
            self.on_profile_request(asked["profile"])

    def last_look(self) -> None:
        """The gang once more, as this process ends (after :meth:`stop`): its last word on it."""
        if self._gang_check is not None:
            self._guard("gang check", self._gang_check)

    def _guard(self, where: str, fn: Callable[[], object]) -> None:
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
                Event.STALL_STARTED,
                {
                    Attr.STEP: step,
                    Attr.STALL_IDLE_S: idle,
                    Attr.STALL_THRESHOLD_S: threshold,
                },
            )
            self.dump("stall")
            self._next_dump = now + min(threshold, STACK_REFRESH_MAX_S)
        elif self.stalled_since is not None and (idle < threshold or gpu_busy):
            self._emit(
                Event.STALL_CLEARED,
                {Attr.STEP: step, Attr.STALL_DURATION_S: now - self.stalled_since},
            )
            self.stalled_since = None
            self.where.forget_stall()
        elif self.stalled_since is not None and now >= self._next_dump:
            self.dump("stall")
            self._next_dump = now + min(threshold, STACK_REFRESH_MAX_S)

    def dump(self, reason: str) -> JsonObject:
        """Where this rank is now (:class:`.stack_watch.StackWatch`), marked stalled or not."""
        return self.where.dump(reason, stalled=self.stalled_since is not None)

    def input_bound_share(self) -> float | None:
        """The median share of recent steps spent waiting for data, if it marks input-bound training."""
        shares = self._wait_shares()
        share = statistics.median(shares) if shares else None
        return share if share is not None and share >= INPUT_BOUND_SHARE else None

    def check_ranks(self, now: float | None = None) -> None:
        if self._backend is None:
            return
        now = time.time() if now is None else now
        latest: dict[int, JsonObject] = {}
        states = read_states(self._backend)
        if self.on_states is not None:
            self.on_states(states)
        for s in states:
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
                    Event.RANK_LOST,
                    {
                        Attr.LOST_RANK: r,
                        Attr.HOST_NAME: str(s.get("host")),
                        Attr.STEP: s.get("step") or -1,
                        Attr.HEARTBEAT_AGE_S: age,
                    },
                )
            elif not lost and r in self.lost_ranks:
                del self.lost_ranks[r]
                self._emit(Event.RANK_RECOVERED, {Attr.LOST_RANK: r})

    def check_previous_attempt(self) -> None:
        if self._backend is None:
            return
        info = previous_attempt_end(read_states(self._backend), self.attempt)
        if info is None:
            return
        self.previous_attempt = info
        self._emit(Event.RUN_RESUMED, {_RESUMED_ATTRS[k]: v for k, v in info.items() if v is not None})

    def status_fields(self) -> StatusSection:
        return {
            "stalled": self.stalled_since is not None,
            "stalled_since": self.stalled_since,
            "stalls": self.stalls,
            "input_bound_share": self.input_bound_share(),
            "lost_ranks": list(self.lost_ranks.values()),
            "previous_attempt": self.previous_attempt,
            "stacks": self.where.latest,
        }
