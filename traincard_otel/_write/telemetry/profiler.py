"""Profile captures on demand: ``torch.profiler`` over this rank's next steps, no restart.

Something asks (``traincard profile`` through the store, read by the watchdog's poll; a
``profile_on`` trigger): :meth:`ProfileCapture.ask` sets ``queue.profile``, the one attribute the
training thread checks at every step end (``Reporter.step_end``). At the next step boundary the
training thread starts the profiler (torch.profiler records a thread's operators only when that
thread starts it, and stopping it on another thread has crashed Kineto), steps it at each boundary
through one warm-up step and ``steps`` recorded ones, and stops it. Its own thread then exports
the Chrome trace, cuts it to ``MAX_TRACE_BYTES`` if needed, summarises it (top operators, the
breakdown) and writes both into the store (:func:`~traincard_otel._store.layout.trace_name`,
:func:`~traincard_otel._store.layout.profile_name`), with a ``traincard.profile.captured`` event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from typing import Final

from ..._safety import internal_error
from ..._schema import Attr, Event
from ..._store import layout
from ..._store.backends import Backend
from ..._types import Foreign, JsonObject
from ..queue import ReportQueue
from . import profile_trace

DEFAULT_STEPS: Final = 5
MAX_STEPS: Final = 100
BASELINE_STEPS: Final = 3  # steps timed just before the profiler starts: its cost is measured against them
WRITE_TRIES: Final = 3

Emit = Callable[[str, Mapping[str, object], object], None]


@dataclasses.dataclass(frozen=True)
class Ask:
    """A capture asked for: ``trigger`` is ``request`` (``traincard profile``) or the kind that
    started it (``throughput_drop``, ``straggler`` ...), ``detail`` what that kind saw."""

    id: str
    steps: int = DEFAULT_STEPS
    shapes: bool = False
    stacks: bool = False
    trigger: str = "request"
    detail: str = ""
    asked_at: float = dataclasses.field(default_factory=time.time)


class ProfileCapture:
    """One rank's profile captures, one at a time (see the module docstring)."""

    def __init__(
        self,
        queue: ReportQueue,
        backend: Backend | None,
        *,
        rank: int,
        attempt: int,
        emit: Emit,
    ) -> None:
        self.queue, self.backend, self.rank, self.attempt = queue, backend, rank, attempt
        self._emit = emit
        self._lock = threading.Lock()
        self._ask: Ask | None = None
        self._prof: Foreign = None
        self._marks: list[float] = []  # perf_counter() at each step boundary of the capture
        self._before: list[float] = []  # ... and of the steps just before it
        self._cost: JsonObject = {}
        self._first_step: int | None = None
        self._ready = False
        self._answered: set[str] = set()
        self._thread: threading.Thread | None = None
        self.latest: JsonObject | None = None  # the latest capture's progress, for the rank's state

    @property
    def busy(self) -> bool:
        return self._ask is not None or (self._thread is not None and self._thread.is_alive())

    def ask(self, ask: Ask) -> bool:
        """Capture the next steps (any thread); False when one is under way or ``ask`` was answered."""
        with self._lock:
            if self.busy or ask.id in self._answered or self.backend is None:
                return False
            self._answered.add(ask.id)
            self._ask = ask
            self.latest = {"id": ask.id, "status": "asked", "trigger": ask.trigger, "asked_at": ask.asked_at}
            self.queue.profile = self  # the training thread starts it at its next step end
        return True

    # -- on the training thread, at each step end while asked ------------------------------------
    def boundary(self) -> None:
        try:
            if self._prof is not None:
                self._step()
                return
            self._before.append(time.perf_counter())
            if len(self._before) > BASELINE_STEPS:
                self._start()
        except Exception as exc:
            self._give_up(exc)

    def _start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        ask = self._ask
        assert ask is not None
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            activities.append(ProfilerActivity.CUDA)
        steps = max(1, min(int(ask.steps), MAX_STEPS))
        self._ready = False
        self._prof = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
            on_trace_ready=self._trace_ready,
            record_shapes=ask.shapes,
            with_stack=ask.stacks,
        )
        before = [b - a for a, b in zip(self._before, self._before[1:], strict=False)]
        self._before = []
        self._cost = {"step_before_s": statistics.median(before)}  # (BASELINE_STEPS of them)
        t0 = time.perf_counter()
        self._prof.start()
        self._marks = [time.perf_counter()]
        self._cost["start_s"] = self._marks[0] - t0
        step = self.queue.step
        self._first_step = step + 2 if isinstance(step, int) else None  # the next one warms up
        self.latest = {**(self.latest or {}), "status": "capturing", "started_at": time.time()}

    def _trace_ready(self, prof: Foreign) -> None:
        self._ready = True

    def _step(self) -> None:
        now = time.perf_counter()
        self._marks.append(now)
        self._prof.step()
        ask = self._ask
        assert ask is not None
        if not self._ready and len(self._marks) <= max(1, min(int(ask.steps), MAX_STEPS)) + 1:
            return
        self._prof.stop()
        self._cost["stop_s"] = time.perf_counter() - now  # the trace's collection, on this thread
        prof, marks, first = self._prof, self._marks, self._first_step
        self._prof, self._ask = None, None
        self.queue.profile = None
        self.latest = {**(self.latest or {}), "status": "writing"}
        self._thread = threading.Thread(
            target=self._finish, args=(ask, prof, marks, first), name="traincard-profile", daemon=True
        )
        self._thread.start()

    def _give_up(self, exc: Exception, *, quiet: bool = False) -> None:
        """The profiler failed to start or step: training goes on unprofiled."""
        prof, self._prof, self._ask = self._prof, None, None
        self._before = []
        self.queue.profile = None
        self.latest = {
            **(self.latest or {}),
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}"[:300],
        }
        if prof is not None:
            with contextlib.suppress(Exception):  # stopping what failed may fail again: nothing to lose
                prof.stop()
        if not quiet:
            internal_error("profile capture", exc)

    # -- on the capture's own thread -------------------------------------------------------------
    def _finish(self, ask: Ask, prof: Foreign, marks: list[float], first: int | None) -> None:
        try:
            t0 = time.perf_counter()
            trace, summary = profile_trace.summarize(prof)
            durations = [b - a for a, b in itertools.pairwise(marks[1:])]  # the recorded steps
            cost = {**self._cost, "export_s": time.perf_counter() - t0}
            during = statistics.median(durations) if durations else None
            before = cost.get("step_before_s")
            cost["step_during_s"] = during
            cost["overhead"] = during / before - 1 if during and before else None
            record = {
                "id": ask.id,
                "rank": self.rank,
                "attempt": self.attempt,
                "trigger": ask.trigger,
                "detail": ask.detail,
                "asked_at": ask.asked_at,
                "started_at": time.time() - (time.perf_counter() - marks[0]),
                "ended_at": time.time(),
                "steps": [first, first + len(durations) - 1] if first is not None and durations else None,
                "shapes": ask.shapes,
                "stacks": ask.stacks,
                "cost": cost,
                "trace": layout.trace_name(ask.id, self.rank),
                **summary,
            }
            self._write(layout.trace_name(ask.id, self.rank), trace)
            self._write(layout.profile_name(ask.id, self.rank), json.dumps(record).encode())
            self.latest = {**(self.latest or {}), "status": "done", "steps": record["steps"]}
            self._emit(
                Event.PROFILE_CAPTURED,
                {
                    Attr.PROFILE_ID: ask.id,
                    Attr.PROFILE_TRIGGER: ask.trigger,
                    Attr.RANK: self.rank,
                    Attr.STEP: record["steps"][1] if record["steps"] else -1,
                    Attr.PROFILE_TRACE: record["trace"],
                },
                None,
            )
        except Exception as exc:
            self.latest = {
                **(self.latest or {}),
                "status": "failed",
                "error": f"{type(exc).__name__}: {exc}"[:300],
            }
            internal_error("profile export", exc)

    def _write(self, name: str, data: bytes) -> None:
        assert self.backend is not None
        for attempt in range(WRITE_TRIES):
            try:
                self.backend.write(name, data)
                return
            except Exception:
                if attempt == WRITE_TRIES - 1:
                    raise
                time.sleep(1.0 + attempt)

    def close(self, timeout_s: float) -> None:
        """At shutdown: a capture the run ended before is given up (said so in the state); one
        being written is waited for (bounded), so its trace is not lost."""
        if self._ask is not None:
            self._give_up(RuntimeError("the run ended before the capture's steps were done"), quiet=True)
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
