"""Goodput from a real pipeline's records: each category from what a loop did, summing to the wall."""

from __future__ import annotations

import time

import pytest

from traincard_otel._analysis.goodput import CATEGORIES, goodput
from traincard_otel._read.load.reader import read_store
from traincard_otel.testing import capture


def test_each_category_comes_from_what_the_loop_did() -> None:
    with capture() as cap:
        r = cap.reporter
        started = cap.pipeline.started_at
        time.sleep(0.2)  # start-up
        with r.phase("train"):
            last = time.perf_counter()
            first_step_at = time.time()  # (the loop's own clock: a loaded machine sleeps longer)
            for step in range(1, 21):
                time.sleep(0.01)  # waiting for the batch
                wait = time.perf_counter() - last
                time.sleep(0.02)  # compute
                now = time.perf_counter()
                r.step_end(step, duration_s=now - last, samples=8, data_wait_s=wait)
                last = now
                if step == 10:
                    with r.phase("eval"):
                        time.sleep(0.15)
                    with r.phase("save"):
                        time.sleep(0.1)
                    last = time.perf_counter()
            # a resume from step 15: steps 16..20 again
            for step in range(16, 21):
                time.sleep(0.02)
                now = time.perf_counter()
                r.step_end(step, duration_s=now - last, samples=8, data_wait_s=0.0)
                last = now
        time.sleep(0.1)  # shutdown
        live = cap.load()
    run = read_store(cap.store)
    assert run.status["status"] == "finished" and live.status["status"] == "running"
    g = goodput(run)
    assert g is not None and g.attempts == 1 and tuple(g.seconds) == CATEGORIES
    s = g.seconds
    assert sum(s.values()) == pytest.approx(g.wall_s)
    assert 0.2 <= s["startup"] <= first_step_at - started + 0.01
    assert s["eval"] == pytest.approx(0.15, abs=0.05) and s["checkpoint"] == pytest.approx(0.1, abs=0.05)
    assert s["data_wait"] == pytest.approx(sum(run.data_wait[0].values)) and s["data_wait"] >= 0.2
    assert s["restart"] >= 5 * 0.02 * 0.8  # five steps run twice, less the run's data-wait share
    assert s["productive"] >= 20 * 0.02
    assert s["shutdown"] >= 0.1
    assert s["other"] < 0.05 and s["stall"] == 0
    assert g.ratio == pytest.approx(s["productive"] / g.wall_s)
    assert goodput(run, now=time.time() + 100).wall_s == pytest.approx(g.wall_s)  # finished: now is ignored
    # running: the wall time runs to now, and the time since the last step end is the step in progress
    live_g = goodput(live, now=time.time() + 100)
    assert live_g is not None and live_g.running and live_g.wall_s > 100
    assert live_g.seconds["other"] > 100 and live_g.seconds["shutdown"] == 0


def test_no_timed_step_is_no_goodput() -> None:
    with capture() as cap:
        cap.reporter.metrics({"loss": 1.0}, step=1)
        run = cap.load()
    assert run.goodput is None


def test_the_whole_run_data_wait_is_kept_beyond_the_tail() -> None:
    with capture() as cap:
        for step in range(1, 2501):
            cap.reporter.step_end(step, duration_s=0.01, data_wait_s=0.001 * (step % 7))
        run = cap.load()
    assert len(run.data_wait[0]) == 1000
    assert run.data_wait_total[0] == pytest.approx(sum(0.001 * (s % 7) for s in range(1, 2501)))
