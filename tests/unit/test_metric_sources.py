"""Metrics read from a source off the training thread land as if reported right after their step end."""

from __future__ import annotations

import random
from typing import Any

import pytest

from traincard_otel._schema import Event, LifecycleEvent, Report, StepEnd
from traincard_otel._write.convert.placement import (
    SourcedRead,
    _at_unique_step_ends,
    _walk_step_ends,
    place_after_step_ends,
)
from traincard_otel.testing import Capture, capture


def _emitted(cap: Capture) -> list[tuple[str | None, Any, Any]]:
    return [(r.log_record.event_name, r.log_record.body, r.log_record.attributes) for r in cap.logs]


def _train(seed: int, via_source: bool, drain_at_resume: bool) -> dict[str, Any]:
    """Step ends with metrics logged after most of them, resumes (rewinds) included, drained at
    random points: also between a step end and its metrics, as the schedule's thread may."""
    with capture() as cap:
        return _train_into(cap, seed, via_source, drain_at_resume)


def _train_into(cap: Capture, seed: int, via_source: bool, drain_at_resume: bool) -> dict[str, Any]:
    reporter, converter = cap.reporter, cap
    logged: list[tuple[dict[str, float], int, str]] = []
    step_end_times: list[float] = []

    def source() -> list[tuple[dict[str, float], int, str]]:
        out = logged[:]
        logged.clear()
        return out

    if via_source:
        reporter.add_metric_source(source)
    rng = random.Random(seed)
    step = 0
    for _ in range(600):
        step += 1
        if rng.random() < 0.03:
            if drain_at_resume:
                converter.drain()  # as a Trainer's flush at the end of training does
            step = max(1, step - rng.randint(1, 40))  # a resume from an earlier checkpoint
        reporter.step_end(step, 0.01, 4, 256, 0.001)
        if rng.random() < 0.05:
            converter.drain()
        if rng.random() < 0.7:
            values = {"loss": rng.random(), "learning_rate": rng.random()}
            if via_source:
                logged.append((values, step, "train"))
                step_end_times.append(reporter.heartbeat_at)  # the time of the step end just reported
            else:
                reporter.metrics(values, step, "train")
        if rng.random() < 0.05:
            converter.drain()
    converter.drain()
    rows, times, events = [], [], []
    for event, body, attrs in _emitted(cap):
        if event == Event.STATUS:
            continue
        if event == Event.METRICS:
            for run in body["runs"]:
                width = len(run["names"])
                for i, s in enumerate(run["steps"]):
                    rows.append(
                        (run["phase"], tuple(run["names"]), s, run["values"][i * width : (i + 1) * width])
                    )
                times.extend(run["times"])
        elif event != Event.STEP_TIMING:
            events.append((event, {k: v for k, v in (attrs or {}).items() if k != "host.name"}))
    return {
        "rows": rows,
        "times": times,
        "events": events,
        "expected_times": step_end_times,
    }


@pytest.mark.parametrize("drain_at_resume", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_metrics_from_a_source_match_metrics_reported_after_their_step_end(
    seed: int, drain_at_resume: bool
) -> None:
    queued = _train(seed, False, drain_at_resume)
    read = _train(seed, True, drain_at_resume)
    assert read["rows"] == queued["rows"]
    assert len(read["rows"]) > 300
    assert read["events"] == queued["events"]  # the same rewinds, and no false ones
    assert any(e == "traincard.run.rewind" for e, _attrs in read["events"])
    if drain_at_resume:  # as after a Trainer's train(): each report timed at its own step end
        assert read["times"] == read["expected_times"]
    # Otherwise a step's ends before and after a rewind in one drain cannot be told apart: the rows
    # and events are still the same, a time may be another step end's or the time read.


def test_a_source_reports_with_no_step_end_and_bad_reports_are_counted() -> None:
    with capture() as cap:
        _source_with_bad_reports(cap)


def _source_with_bad_reports(cap: Capture) -> None:
    reporter = cap.reporter
    reports: list[Any] = [
        ({"eval_loss": 0.5}, 3.0, "eval"),
        ("not a mapping", 4, None),
        ({"x": 1.0}, None, None),
    ]
    reporter.add_metric_source(lambda: [reports.pop(0) for _ in range(len(reports))])
    cap.drain()
    assert cap.status()["rejected"] == {"bad_report": 1}
    assert cap.status()["last_metrics"] == {"eval_loss": 0.5, "x": 1.0}
    run = cap.load()
    assert run.metrics["eval_loss"].steps == [3]  # a float step taken as an int
    assert run.status["rejected"] == {"bad_report": 1}  # shown in the card with the other rejections


def test_a_removed_source_is_not_read() -> None:
    with capture() as cap:
        _removed_source(cap)


def _removed_source(cap: Capture) -> None:
    reporter, converter = cap.reporter, cap
    calls: list[int] = []

    def source() -> list[Any]:
        calls.append(1)
        return []

    reporter.add_metric_source(source)
    converter.drain()
    reporter.remove_metric_source(source)
    converter.drain()
    assert calls == [1]


def test_the_common_case_places_reports_as_the_step_by_step_walk_does() -> None:
    rng = random.Random(7)
    fast = 0
    for _ in range(2000):
        steps = list(range(rng.randint(0, 3), rng.randint(3, 12)))
        if steps and rng.random() < 0.2:
            steps.insert(rng.randrange(len(steps) + 1), rng.choice(steps))  # a rewind repeats a step
        items: list[Report] = []
        for i, step in enumerate(steps):
            items.append(StepEnd(100.0 + i, step, 0.01, None, None, None))
            if rng.random() < 0.2:
                items.append(LifecycleEvent(100.5 + i, "traincard.checkpoint", {}, None))
        logged = sorted(rng.sample(steps, k=min(len(steps), rng.randint(0, 6))))
        if rng.random() < 0.3:
            logged.append(rng.randint(-1, 14))  # a step with no step end in this drain
        if rng.random() < 0.2:
            rng.shuffle(logged)
        read = [SourcedRead({"loss": float(s)}, s, "train", 200.0 + j) for j, s in enumerate(logged)]
        last_end = (rng.randint(-1, 3), 50.0) if rng.random() < 0.5 else None
        placed = _at_unique_step_ends(items, read)
        if placed is not None:
            fast += 1
            assert placed == _walk_step_ends(items, read, last_end)
        assert place_after_step_ends(items, read, last_end) == _walk_step_ends(items, read, last_end)
    assert 400 < fast < 1600  # both paths taken
