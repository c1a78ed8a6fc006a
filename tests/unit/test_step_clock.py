"""The seed API times steps itself: ``step_end(step)`` without ``duration_s`` records the time since
the previous step end, or since the latest phase start or end, so a raw loop that passes nothing
else gets step times, throughput and goodput; a gang of such loops names its slowest rank."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._analysis.gang.attribution import analyze
from traincard_otel.testing import capture

from tests.support.helpers import subprocess_env


def _durations(run: traincard_otel.RunData) -> dict[int, float]:
    series = run.step_times[0]
    return dict(zip(series.steps, series.values, strict=True))


def test_a_loop_that_passes_only_the_step_gets_its_step_times_without_set_up_or_evaluation() -> None:
    with capture() as cap:
        r = cap.reporter
        time.sleep(0.3)  # loading the model: before the train phase, no step's time
        with r.phase("train"):
            for step in range(1, 11):
                time.sleep(0.02 if step != 1 else 0.05)
                r.step_end(step, samples=8)
                if step == 5:
                    with r.phase("eval"):  # between steps 5 and 6: no step's time
                        time.sleep(0.3)
        run = cap.load()
    took = _durations(run)
    assert sorted(took) == list(range(1, 11))
    assert 0.05 <= took[1] < 0.25  # from the train phase's start, not the reporter's
    assert all(0.02 <= took[s] < 0.2 for s in range(2, 11))  # step 6 leaves the evaluation out
    assert run.throughput["samples_per_second{rank=0}"].values == pytest.approx(
        [8 / took[s] for s in range(1, 11)]
    )
    g = run.goodput
    assert g is not None and g.seconds["productive"] == pytest.approx(sum(took.values()), rel=0.01)
    assert g.seconds["eval"] >= 0.3 and g.seconds["startup"] >= 0.3


def test_outside_a_phase_the_first_step_counts_from_the_reporters_start() -> None:
    with capture() as cap:
        time.sleep(0.1)
        cap.reporter.step_end(1)
        run = cap.load()
    assert _durations(run)[1] >= 0.1


def test_given_durations_are_kept_and_the_clock_follows_every_step_end() -> None:
    with capture() as cap:
        r = cap.reporter
        r.step_end(1, 0.5)  # an adapter's own measure
        time.sleep(0.03)
        r.step_end(2)  # timed from step 1's end, not from the start
        end = time.perf_counter()
        time.sleep(0.05)  # not counted: the caller says when step 3 ended
        r.step_end(3, at=end + 0.01)
        run = cap.load()
    took = _durations(run)
    assert took[1] == 0.5
    assert 0.03 <= took[2] < 0.2
    assert took[3] == pytest.approx(0.01, abs=0.005)  # from step 2's end, read just before `end`


_RANK = """
import sys, time, traincard_otel
r = traincard_otel.configure()
with r.phase("train"):
    for step in range(1, 13):
        time.sleep(float(sys.argv[1]))
        r.step_end(step)
traincard_otel.shutdown()
"""


@pytest.mark.slow
def test_a_gang_of_loops_that_pass_only_the_step_names_the_rank_at_half_speed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", _RANK, "0.08" if rank == 2 else "0.04"],
            env=subprocess_env(
                TRAINCARD_DIR=str(store),
                TRAINCARD_SYSTEM="false",
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE="4",
            ),
        )
        for rank in range(4)
    ]
    assert [p.wait(timeout=120) for p in ranks] == [0] * 4
    run = traincard_otel.load(store)
    assert sorted(run.step_times) == [0, 1, 2, 3]
    summary = analyze(run)
    assert summary is not None
    slowest = summary["stragglers"]["slowest"]
    assert slowest is not None and slowest["rank"] == 2 and slowest["ratio"] >= 1.5
