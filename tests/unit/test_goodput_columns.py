"""Goodput at C speed reads a run as the loop it replaced, a step at a time, read it: the same
seconds per category for resumes, retries, evaluation phases, stalls, data waits, steps out of
time order and steps that are not all integers."""

from __future__ import annotations

import bisect
import math
import operator
import random
from array import array

import pytest

from traincard_otel._analysis import steps as steps_module
from traincard_otel._analysis.goodput import (
    CATEGORIES,
    Goodput,
    _int,
    _num,
    disjoint,
    goodput,
    overlap,
    span_category,
)
from traincard_otel._data.rundata import RunData, Series
from traincard_otel._read.load.columns import rank_series
from traincard_otel._schema import Attr, Event


class _StepByStep:
    """The steps as lists, sorted by end time (the reference reads them one at a time)."""

    def __init__(self, series: Series) -> None:
        times = series.times
        if all(map(operator.le, times, times[1:])):  # the usual case: in order
            self.ends, self.durations = list(times), list(series.values)
            self.steps, self.attempts = list(series.steps), list(series.attempts)
        else:  # ranks' clocks, or attempts read out of order
            order = sorted(range(len(series.values)), key=times.__getitem__)
            self.ends = [times[i] for i in order]
            self.durations = [series.values[i] for i in order]
            self.steps = [series.steps[i] for i in order]
            self.attempts = [series.attempts[i] for i in order]
        self.excluded = [False] * len(self.ends)

    def overlap(self, lo: float, hi: float) -> float:
        """Seconds of counted step time inside [lo, hi)."""
        total = 0.0
        i = bisect.bisect_right(self.ends, lo)
        while i < len(self.ends) and self.ends[i] - self.durations[i] < hi:
            if not self.excluded[i]:
                total += max(0.0, min(hi, self.ends[i]) - max(lo, self.ends[i] - self.durations[i]))
            i += 1
        return total


def _step_by_step(run: RunData, now: float | None = None) -> Goodput | None:
    """goodput() as it was written before it ran at C speed: a loop per step."""
    if not run.step_times:
        return None
    rank = 0 if 0 in run.step_times else min(run.step_times)
    series = run.step_times[rank]
    if not len(series.values):
        return None
    steps = _StepByStep(series)
    # A store is read as it is: records of a hostile or damaged one may hold anything.
    states = sorted(
        (s for s in run.states if _int(s.get("rank")) == rank), key=lambda s: _int(s.get("attempt"))
    )
    events = [e for e in run.events if _int(e.get("rank")) == rank and _num(e.get("time")) is not None]
    phases = [
        p
        for p in run.phases
        if _int(p.get("rank")) == rank and _num(p.get("t0")) is not None and _num(p.get("t1")) is not None
    ]

    # Attempt windows: from the state's start to its last word (a phase, event or step may be later).
    windows: dict[int, list[float]] = {}
    for s in states:
        start = _num(s.get("started_at"))
        end = _num(s.get("updated_at")) or start
        if start is not None and end is not None:
            windows[_int(s.get("attempt"))] = [start, end]
    for end, d, a in zip(steps.ends, steps.durations, steps.attempts, strict=True):
        w = windows.setdefault(a, [end - d, end])
        w[0], w[1] = min(w[0], end - d), max(w[1], end)
    for p in phases:
        t0, t1 = float(p["t0"]), float(p["t1"])
        w = windows.setdefault(_int(p.get("attempt")), [t0, t1])
        w[0], w[1] = min(w[0], t0), max(w[1], t1)
    last_attempt = max(windows)
    running = bool(states) and states[-1].get("status") == "running"
    if running and now is not None:
        windows[last_attempt][1] = max(windows[last_attempt][1], now)
    run_end = windows[last_attempt][1]

    # Phases and stalls, made disjoint.
    pieces: list[tuple[float, float, str]] = []
    for p in phases:
        category = span_category(str(p.get("n", "")))
        if category is not None and float(p["t1"]) > float(p["t0"]):
            pieces.append((float(p["t0"]), float(p["t1"]), category))
    open_stall: float | None = None
    for e in sorted(events, key=lambda e: float(e["time"])):
        attrs = e.get("attributes") or {}
        if e.get("name") == Event.STALL_STARTED:
            open_stall = float(e["time"]) - (_num(attrs.get(Attr.STALL_IDLE_S)) or 0.0)
        elif e.get("name") == Event.STALL_CLEARED:
            t = float(e["time"])
            start = t - (_num(attrs.get(Attr.STALL_DURATION_S)) or 0.0)
            pieces.append((open_stall if open_stall is not None else start, t, "stall"))
            open_stall = None
    if open_stall is not None and open_stall < run_end:
        pieces.append((open_stall, run_end, "stall"))
    special = disjoint(pieces)

    seconds = dict.fromkeys(CATEGORIES, 0.0)
    # Step ends inside an evaluation phase are evaluation steps: their time is the phase's.
    for t0, t1, category in special:
        if category != "stall":
            lo, hi = bisect.bisect_right(steps.ends, t0), bisect.bisect_right(steps.ends, t1)
            for i in range(lo, hi):
                steps.excluded[i] = True
    step_total = 0.0
    recomputed: list[tuple[float, float]] = []  # (end time, duration) of the steps run again
    reached: int | None = None
    for step, end, d, excluded in zip(steps.steps, steps.ends, steps.durations, steps.excluded, strict=True):
        if excluded:
            continue
        step_total += d
        if type(step) is int:
            if reached is not None and step <= reached:
                recomputed.append((end, d))
            else:
                reached = step
    in_special = 0.0
    for t0, t1, category in special:
        seconds[category] += t1 - t0
        in_special += steps.overlap(t0, t1)
    step_total -= in_special

    waited = min(_num(run.data_wait_total.get(rank, 0.0)) or 0.0, max(step_total, 0.0))
    wait_share = waited / step_total if step_total > 0 else 0.0
    seconds["data_wait"] = waited
    # A redone step's own wait where the reader still holds it (its last 1000 waits), else the
    # run's average share.
    kept = run.data_wait.get(rank)
    known = dict(zip(kept.times, kept.values, strict=False)) if kept is not None else {}
    redone = sum(d - min(known[t], d) if t in known else d * (1 - wait_share) for t, d in recomputed)
    redone = min(redone, max(step_total - waited, 0.0))
    seconds["restart"] = redone
    seconds["productive"] = max(0.0, step_total - waited - redone)

    # The stretches before an attempt's first step and after its last one.
    first_start = min(w[0] for w in windows.values())
    ordered = sorted(windows.items())
    for k, (attempt, (start, end)) in enumerate(ordered):
        own = [i for i, a in enumerate(steps.attempts) if a == attempt]
        first = steps.ends[own[0]] - steps.durations[own[0]] if own else end
        last = steps.ends[own[-1]] if own else end
        head = max(0.0, first - start - overlap(start, first, special))
        tail = max(0.0, end - last - overlap(last, end, special))
        seconds["startup" if k == 0 else "restart"] += head
        if k < len(ordered) - 1:
            seconds["restart"] += tail
        else:  # while running, the time since the last step end is the step in progress
            seconds["other" if running else "shutdown"] += tail
        if k + 1 < len(ordered):
            gap_end = ordered[k + 1][1][0]
            seconds["restart"] += max(0.0, gap_end - end - overlap(end, gap_end, special))

    wall = max(run_end - first_start, 0.0)
    accounted = sum(v for k, v in seconds.items() if k != "other")
    seconds["other"] = max(0.0, wall - accounted)
    if accounted > wall:  # overlapping records (clock steps between processes): never above the wall
        scale = wall / accounted if accounted > 0 else 0.0
        seconds = {k: v * scale for k, v in seconds.items()}
    seconds = {k: (v if math.isfinite(v) else 0.0) for k, v in seconds.items()}
    return Goodput(wall_s=wall, seconds=seconds, rank=rank, attempts=len(windows), running=running)


def _run(seed: int, typed: bool) -> RunData:
    """A rank-0 run of three attempts with resumes, an evaluation and a save phase, a stall and
    data waits (typed: the reader's columns; else lists, some steps not integers)."""
    rng = random.Random(seed)
    run = RunData(source="test")
    series = rank_series("step_time", 0) if typed else Series("step_time", {"rank": "0"})
    waits = Series("data_wait", {"rank": "0"})
    t, step = 1000.0, 0
    for attempt in range(3):
        run.states.append(
            {"rank": 0, "attempt": attempt, "started_at": t - 5, "updated_at": t + 1, "status": "failed"}
        )
        if attempt:
            step = max(0, step - rng.randint(5, 60))  # resumed from a checkpoint before where it stopped
        for k in range(rng.randint(150, 400)):
            if rng.random() < 0.02:  # a rewind inside an attempt (a resume of its own)
                step = max(0, step - rng.randint(1, 20))
            step += 1
            d = rng.uniform(0.005, 0.02) if k != 3 else 9.0  # one reported as longer: it starts earlier
            t += (d if k != 3 else 0.01) + (rng.uniform(0, 0.05) if rng.random() < 0.05 else 0.0)
            s = step if typed or rng.random() > 0.05 else float(step)  # a float step: not an int
            for col, v in (
                (series.steps, s),
                (series.values, d),
                (series.times, t),
                (series.attempts, attempt),
                (series.ranks, 0),
            ):
                col.append(v)
            if rng.random() < 0.5:
                w = rng.uniform(0, d / 2)
                run.data_wait_total[0] = run.data_wait_total.get(0, 0.0) + w
                for col, v in (
                    (waits.steps, s),
                    (waits.values, w),
                    (waits.times, t),
                    (waits.attempts, attempt),
                    (waits.ranks, 0),
                ):
                    col.append(v)
        run.states[-1]["updated_at"] = t + rng.uniform(0, 2)
        t += rng.uniform(1, 5)
    if rng.random() < 0.5:  # read out of time order (ranks' clocks)
        order = list(range(len(series.values)))
        rng.shuffle(order)
        for name in ("steps", "values", "times", "attempts", "ranks"):
            col = getattr(series, name)
            moved = [col[i] for i in order]
            setattr(series, name, array(col.typecode, moved) if isinstance(col, array) else moved)
    run.states[-1]["status"] = "finished" if seed % 2 else "running"
    times = series.times
    lo, hi = min(times), max(times)
    for name, a, b in (("training.eval", 0.3, 0.35), ("training.save", 0.6, 0.62)):
        run.phases.append(
            {"n": name, "t0": lo + a * (hi - lo), "t1": lo + b * (hi - lo), "rank": 0, "attempt": 0}
        )
    at = lo + 0.8 * (hi - lo)
    run.events.append(
        {"name": Event.STALL_STARTED, "time": at, "attributes": {Attr.STALL_IDLE_S: 0.5}, "rank": 0}
    )
    run.events.append(
        {"name": Event.STALL_CLEARED, "time": at + 1, "attributes": {Attr.STALL_DURATION_S: 1.5}, "rank": 0}
    )
    tail = slice(-1000, None)
    for name in ("steps", "values", "times", "attempts", "ranks"):
        setattr(waits, name, getattr(waits, name)[tail])
    run.step_times[0], run.data_wait[0] = series, waits
    return run


@pytest.mark.parametrize("vector", [False, True], ids=["map", "numpy"])
@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_goodput_is_what_a_loop_over_the_steps_found(
    seed: int, typed: bool, vector: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of comparing a column (numpy's for long ones, ``map`` for short) read alike."""
    if vector:
        pytest.importorskip("numpy")
        monkeypatch.setattr(steps_module, "VECTOR_MIN", 0)
    run = _run(seed, typed)
    now = max(run.step_times[0].times) + 30
    got, expected = goodput(run, now), _step_by_step(run, now)
    assert got is not None and expected is not None
    assert (got.wall_s, got.attempts, got.running) == pytest.approx(
        (expected.wall_s, expected.attempts, expected.running)
    )
    assert tuple(got.seconds) == CATEGORIES
    for category in CATEGORIES:
        assert got.seconds[category] == pytest.approx(expected.seconds[category], rel=1e-9, abs=1e-9), (
            category
        )
    assert got.seconds["restart"] > 0  # the resumes were found


@pytest.mark.parametrize("vector", [False, True], ids=["map", "numpy"])
@pytest.mark.parametrize("seed", range(6))
def test_a_growing_run_analysed_again_and_again_reads_as_analysed_afresh(
    seed: int, vector: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live card's series only grow: each analysis starts from what the last one found. New
    steps, a resume across the last analysis, an attempt starting, and an evaluation phase that
    ends later over steps already analysed all read as a fresh analysis reads them."""
    if vector:
        pytest.importorskip("numpy")
        monkeypatch.setattr(steps_module, "VECTOR_MIN", 0)
    whole = _run(seed, typed=True)
    full = whole.step_times[0]
    live = RunData(source="live", states=whole.states, events=whole.events, data_wait=whole.data_wait)
    live.data_wait_total = whole.data_wait_total
    series = live.step_times[0] = rank_series("step_time", 0)
    rng = random.Random(seed)
    at, phases = 0, list(whole.phases)
    while at < len(full.values):
        n = rng.randint(1, 200)
        for name in ("steps", "values", "times", "attempts", "ranks"):
            getattr(series, name).extend(getattr(full, name)[at : at + n])
        at += n
        if phases and at > len(full.values) // 2:
            live.phases.append(phases.pop(0))  # ended now, over steps analysed before
        now = series.times[-1] + 5
        got, expected = goodput(live, now), _step_by_step(live, now)
        assert got is not None and expected is not None
        for category in CATEGORIES:
            assert got.seconds[category] == pytest.approx(expected.seconds[category], rel=1e-9, abs=1e-9)
        assert (got.wall_s, got.attempts) == pytest.approx((expected.wall_s, expected.attempts))
