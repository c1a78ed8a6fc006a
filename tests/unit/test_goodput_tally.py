"""The writer's streaming goodput (one attempt, as its converter sees it) against the read-time
goodput of the same records: equal within an attempt, and differing across attempts by exactly
what one attempt cannot see (the others' time, the gap, the steps an earlier attempt reached)."""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass, field

import pytest

from traincard_otel._analysis.goodput import CATEGORIES, Goodput, goodput
from traincard_otel._analysis.goodput_tally import RECENT_STEPS, GoodputTally
from traincard_otel._data.rundata import RunData, Series
from traincard_otel._read.load.reader import read_store
from traincard_otel._schema import PHASE_SPAN_PREFIX, Attr, Event
from traincard_otel.testing import capture


@dataclass
class _Attempt:
    """One attempt's records in report order, fed alike to a tally and into a RunData."""

    attempt: int
    started_at: float
    feed: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)
    steps: list[tuple[int, float, float, float]] = field(default_factory=list)  # step, end, d, wait
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    events: list[tuple[float, str, dict[str, float]]] = field(default_factory=list)
    ended_at: float = 0.0

    def step(self, step: int, end: float, d: float, wait: float = math.nan) -> None:
        self.feed.append(("steps", ([step], [end], [d], [wait])))
        self.steps.append((step, end, d, wait))

    def phase(
        self, name: str, t0: float, t1: float, token: int, inside: list[tuple[int, float, float]]
    ) -> None:
        """A phase from t0 to t1 with step ends reported inside it (evaluation steps)."""
        self.feed.append(("phase_started", (t0, name, token)))
        for step, end, d in inside:
            self.step(step, end, d)
        self.feed.append(("phase_ended", (t1, token)))
        self.phases.append((name, t0, t1))

    def stall(self, started: float, idle: float, cleared: float, lasted: float) -> None:
        self.events.append((started, Event.STALL_STARTED, {Attr.STALL_IDLE_S: idle}))
        self.events.append((cleared, Event.STALL_CLEARED, {Attr.STALL_DURATION_S: lasted}))

    def tally(self, now: float) -> Goodput | None:
        t = GoodputTally(self.started_at, first_attempt=self.attempt == 0)
        stalls = sorted(self.events)
        for kind, args in self.feed:
            if kind == "steps":  # a stall's events go in where their time falls among the steps
                while stalls and stalls[0][0] <= args[1][0]:  # type: ignore[index]
                    self._stall(t, stalls.pop(0))
            getattr(t, "add_steps" if kind == "steps" else kind)(*args)
        for e in stalls:
            self._stall(t, e)
        return t.goodput(now, running=False)

    @staticmethod
    def _stall(t: GoodputTally, e: tuple[float, str, dict[str, float]]) -> None:
        at, name, attrs = e
        if name == Event.STALL_STARTED:
            t.stall_started(at, attrs[Attr.STALL_IDLE_S])
        else:
            t.stall_cleared(at, attrs[Attr.STALL_DURATION_S])


def _run(attempts: list[_Attempt]) -> RunData:
    data = RunData(source="t")
    timed = Series(name="step_time")
    waits = Series(name="data_wait")
    for a in attempts:
        data.states.append(
            {
                "rank": 0,
                "attempt": a.attempt,
                "started_at": a.started_at,
                "updated_at": a.ended_at,
                "status": "finished",
            }
        )
        for step, end, d, w in a.steps:
            for s, col in ((timed, d), (waits, w)):
                if col == col:
                    s.steps.append(step)
                    s.values.append(col)
                    s.times.append(end)
                    s.attempts.append(a.attempt)
                    s.ranks.append(0)
        data.phases += [
            {"rank": 0, "attempt": a.attempt, "n": f"{PHASE_SPAN_PREFIX}{n}", "t0": t0, "t1": t1}
            for n, t0, t1 in a.phases
        ]
        data.events += [{"rank": 0, "time": t, "name": n, "attributes": attrs} for t, n, attrs in a.events]
    data.step_times[0], data.data_wait[0] = timed, waits
    data.data_wait_total[0] = sum(waits.values)
    return data


def _loop(
    rng: random.Random, attempt: int, start: float, first_step: int, steps: int, unmeasured: float = 0.2
) -> _Attempt:
    """A loop with start-up, data waits (``unmeasured`` of them not measured), evaluation and save
    phases, stalls and a rewind (a resume from a checkpoint inside the attempt)."""
    a = _Attempt(attempt, start)
    t, step, token = start + rng.uniform(0.5, 3.0), first_step, 0
    for i in range(steps):
        d = rng.uniform(0.01, 0.1)
        if rng.random() < 0.01:  # a stall: the step takes minutes, the watchdog sees it go and end
            d = rng.uniform(60, 120)
            a.stall(t + 50, 50 - rng.uniform(0, 0.5), t + d + 0.4, d + 0.4 - rng.uniform(0, 0.5))
        t += d
        a.step(step, t, d, rng.uniform(0, 0.005) if rng.random() >= unmeasured else math.nan)
        step += 1
        if i % 97 == 50:  # a resume from a checkpoint 20 steps back
            step -= 20
        if rng.random() < 0.03:
            token += 1
            t0, t1 = t, t + rng.uniform(0.5, 5)
            name = rng.choice(["eval", "validation", "save", "train_epoch"])
            inside = [(10_000 + k, t0 + (t1 - t0) * (k + 1) / 4, 0.05) for k in range(3)]
            a.phase(name, t0, t1, token, inside if name != "train_epoch" else [])
            t = t1
    a.ended_at = t + rng.uniform(0.1, 1.0)
    return a


def _same(tally: Goodput | None, read: Goodput | None) -> None:
    assert tally is not None and read is not None
    assert tally.wall_s == pytest.approx(read.wall_s)
    for k in CATEGORIES:
        assert tally.seconds[k] == pytest.approx(read.seconds[k], abs=1e-6), k
    assert sum(tally.seconds.values()) == pytest.approx(tally.wall_s)


@pytest.mark.parametrize("seed", range(6))
def test_one_attempt_streamed_is_the_read_time_goodput(seed: int) -> None:
    a = _loop(random.Random(seed), 0, 1000.0, 1, 600)
    _same(a.tally(a.ended_at), goodput(_run([a])))


def test_a_long_run_is_summed_in_bounded_memory_and_still_agrees() -> None:
    a = _loop(random.Random(7), 0, 0.0, 1, 20_000)
    t = GoodputTally(a.started_at)
    for kind, args in a.feed:
        getattr(t, "add_steps" if kind == "steps" else kind)(*args)
    assert t._recent_rows == RECENT_STEPS and len(t._pieces) <= 2  # phases folded as they end
    stallless = _Attempt(0, a.started_at, a.feed, a.steps, a.phases, [], a.ended_at)
    _same(t.goodput(a.ended_at, running=False), goodput(_run([stallless])))


def test_a_later_attempt_differs_from_the_whole_run_by_what_it_cannot_see() -> None:
    rng = random.Random(3)
    first = _loop(rng, 0, 0.0, 1, 300, unmeasured=0)
    reached = max(s for s, *_ in first.steps if s < 10_000)
    second = _loop(rng, 1, first.ended_at + 30.0, reached - 50, 300, unmeasured=0)  # 50 steps back
    whole = goodput(_run([first, second]))
    t0, t1 = first.tally(first.ended_at), second.tally(second.ended_at)
    assert whole is not None and t0 is not None and t1 is not None and whole.attempts == 2
    _same(t0, goodput(_run([first])))
    alone = goodput(_run([second]))  # read alone, its start-up is no restart's cost
    assert alone is not None and t1.seconds["startup"] == 0
    alone.seconds["restart"] += alone.seconds.pop("startup")
    _same(t1, dataclasses.replace(alone, seconds={**alone.seconds, "startup": 0.0}))
    # The whole run adds the gap between the attempts, the first one's tail, and the 50 steps the
    # second computed again, which its own tally counts as productive.
    assert whole.wall_s == pytest.approx(second.ended_at - first.started_at)
    gap, tail = 30.0, t0.seconds["shutdown"]
    redone = whole.seconds["restart"] - t0.seconds["restart"] - t1.seconds["restart"] - tail - gap
    assert redone > 50 * 0.01
    assert whole.seconds["productive"] == pytest.approx(
        t0.seconds["productive"] + t1.seconds["productive"] - redone, abs=1e-6
    )


def test_a_pipeline_s_tally_agrees_with_its_store() -> None:
    """A real loop through the converter: startup, waits, an eval and a save phase, a resume."""
    with capture() as cap:
        r = cap.reporter
        time.sleep(0.05)
        with r.phase("train"):
            last = time.perf_counter()
            for step in [*range(1, 21), *range(16, 26)]:
                time.sleep(0.003)
                now = time.perf_counter()
                r.step_end(step, duration_s=now - last, samples=8, tokens=64, data_wait_s=0.001)
                last = now
                if step == 10:
                    with r.phase("eval"):
                        time.sleep(0.01)
                        r.step_end(1000, duration_s=0.01)  # an evaluation step: the phase's time
                        time.sleep(0.01)
                    with r.phase("save"):
                        time.sleep(0.01)
                    last = time.perf_counter()
                cap.drain()  # drains between reports, as the schedule does
        pipeline = cap.pipeline
    read = goodput(read_store(cap.store))
    assert read is not None
    _same(pipeline.tally.goodput(pipeline.started_at + read.wall_s, running=False), read)
    assert read.seconds["eval"] > 0.02 and read.seconds["restart"] > 0
