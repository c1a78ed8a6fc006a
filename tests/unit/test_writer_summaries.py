"""Each process that writes telemetry keeps its own summary, written by its own store writer, and a
task's summary is its writers' merged: here a torchrun-like task (the Metaflow step process, which
knows the foreach position and the flow's parameters, beside the ranks it started) retried once,
each process a real pipeline writing into one folder."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from traincard_otel._analysis.analysis import analyse
from traincard_otel._analysis.summary import CURVE_POINTS, curve_points, higher_is_better, task_summary
from traincard_otel._analysis.summary_stream import CurveBuckets, SummaryTally
from traincard_otel._identity import ForeachPosition, MetaflowIdentity
from traincard_otel._read.load.reader import read_store
from traincard_otel._read.load.summaries import read_summary
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.report.reporter import Reporter

POSITION = ForeachPosition(split="start", parent="", index=2, num_splits=4, step="train")


def _identity(attempt: int) -> MetaflowIdentity:
    return MetaflowIdentity("F", "1", "train", "7", attempt, None, foreach=POSITION)


def _process(
    store: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    attempt: int,
    rank: int | None,
    steps: range = range(0),
    fail: bool = False,
    flow_parameters: dict[str, object] | None = None,
) -> None:
    """One process of the task: the step process (``rank`` None, Metaflow's identity) or a rank
    it started (``RANK``/``WORLD_SIZE``, the attempt inherited), reporting, then shutting down."""
    with monkeypatch.context() as env:
        if rank is not None:
            env.setenv("RANK", str(rank))
            env.setenv("WORLD_SIZE", "2")
            env.setenv("LOCAL_RANK", str(rank))
        found = _pipeline.start(
            backend=LocalBackend(store),
            metaflow_identity=_identity(attempt) if rank is None else None,
            system=False,
            capture_console=False,
            attempt=attempt,
            rank_timeout_s=3600.0,
        )
        assert found is not None
        reporter = Reporter._bound(found)
        reporter.progress(flops_per_token=1e6, peak_flops=1e12)
        if flow_parameters:
            reporter.hyperparameters(flow_parameters)
        if rank == 0:
            reporter.hyperparameters({"learning_rate": 0.01 * (attempt + 1)})
        for step in steps:
            reporter.step_end(step, duration_s=0.01, samples=4, tokens=64, data_wait_s=0.001)
            if rank == 0:
                reporter.metrics({"loss": 10.0 / step, "eval_accuracy": step / 100}, step=step)
        if fail:
            try:
                raise RuntimeError("diverged")
            except RuntimeError as exc:
                reporter.failure(exc)
        found.shutdown()


def _written(store: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((store / "summary").glob("*.json"))]


def test_a_task_s_summary_merges_its_writers_across_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "F" / "1" / "train" / "7" / "traincard"
    # Attempt 0: the step process, its rank 0 (metrics) and rank 1; rank 1 fails at step 30.
    _process(store, monkeypatch, attempt=0, rank=None, flow_parameters={"lr": "0.1", "model": "tiny"})
    _process(store, monkeypatch, attempt=0, rank=0, steps=range(1, 41))
    _process(store, monkeypatch, attempt=0, rank=1, steps=range(1, 31), fail=True)
    first = read_summary(LocalBackend(store))
    assert first is not None and first["status"] == "failed" and first["failure"] == "RuntimeError: diverged"
    # Attempt 1 resumes at step 21 and finishes.
    _process(store, monkeypatch, attempt=1, rank=None, flow_parameters={"lr": "0.1", "model": "tiny"})
    _process(store, monkeypatch, attempt=1, rank=0, steps=range(21, 61))
    _process(store, monkeypatch, attempt=1, rank=1, steps=range(21, 61))

    own = _written(store)
    assert sorted((s["attempt"], s["rank"]) for s in own) == [(0, 0), (0, 0), (0, 1), (1, 0), (1, 0), (1, 1)]
    assert len({s["writer"] for s in own}) == 6  # one object per process, none overwritten
    launchers = [s for s in own if s["sweep"]]
    assert len(launchers) == 2 and all(not s["metrics"] and s["goodput"] is None for s in launchers)
    assert all(s["sweep"] == POSITION.as_dict() and s["pathspec"] == "F/1/train/7" for s in launchers)

    merged = read_summary(LocalBackend(store))
    assert merged is not None
    assert (merged["status"], merged["step"], merged["failure"]) == ("finished", 60, None)
    assert merged["pathspec"] == "F/1/train/7" and merged["sweep"] == POSITION.as_dict()
    assert merged["hyperparameters"] == {"lr": 0.1, "model": "tiny", "learning_rate": 0.02}  # attempt 1's
    loss = merged["metrics"]["loss"]
    assert (loss["last"], loss["last_step"], loss["best"], loss["best_step"]) == (10 / 60, 60, 10 / 60, 60)
    assert loss["points"] == 40 + 40 and merged["main"] == "loss"
    accuracy = merged["metrics"]["eval_accuracy"]
    assert (accuracy["best"], accuracy["last"]) == (0.6, 0.6)
    curve = curve_points(merged["curve"])  # attempt 0's steps, then attempt 1's from step 21
    assert 2 <= len(curve) <= CURVE_POINTS and curve[0][0] <= 40
    assert curve[-1][0] == 60 and 10 / 60 <= curve[-1][1] <= 10 / 55  # the last bucket's mean
    ranks_mfu = [s["mfu"] for s in own if s["attempt"] == 1 and not s["sweep"]]
    assert merged["mfu"] == pytest.approx(sum(ranks_mfu) / 2) and 0 < merged["mfu"] < 1
    assert 0 < merged["goodput"] < 1

    # The same figures as a summary of the whole store read (what sweep() makes of an older store).
    data = read_store(LocalBackend(store), source="F/1/train/7")
    read = task_summary(data, analyse(data))
    for name in ("loss", "eval_accuracy"):
        for key in ("last", "last_step", "best", "best_step", "points"):
            assert merged["metrics"][name][key] == pytest.approx(read["metrics"][name][key]), (name, key)
    # (the read-time step is any rank-0 state's: the step process's, None, or the rank's, 60)
    assert merged["hyperparameters"] == read["hyperparameters"] and read["step"] in (None, 60)


def test_a_summary_is_written_again_at_most_every_ten_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traincard_otel._write.pipeline import own_summary

    monkeypatch.setattr(own_summary, "SUMMARY_INTERVAL_S", 0.3)
    pipeline = _pipeline.start(backend=LocalBackend(tmp_path), system=False, flush_interval_s=0.05)
    assert pipeline is not None
    try:
        reporter = Reporter._bound(pipeline)
        reporter.metrics({"loss": 1.0}, step=1)
        deadline = time.monotonic() + 10
        while not list(tmp_path.glob("summary/*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        [path] = list(tmp_path.glob("summary/*.json"))
        assert json.loads(path.read_text())["status"] == "running"
        reporter.metrics({"loss": 0.5}, step=2)
        while json.loads(path.read_text())["metrics"]["loss"]["last"] != 0.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(path.read_text())["metrics"]["loss"]["best"] == 0.5
    finally:
        pipeline.shutdown()
    assert json.loads(path.read_text())["status"] == "finished"


def test_a_curve_keeps_equal_buckets_in_bounded_memory() -> None:
    buckets = CurveBuckets()
    steps = list(range(1, 10_001))
    values = [float(s) if s % 1000 else math.nan for s in steps]
    for lo in range(0, 10_000, 333):  # as the converter hands them over, a drain at a time
        buckets.add(steps[lo : lo + 333], values[lo : lo + 333])
    assert len(buckets.points) <= 2 * CURVE_POINTS and sum(buckets.points) == 10_000
    curve = curve_points(buckets.curve())
    assert len(curve) <= CURVE_POINTS and curve[-1][0] == 10_000
    # each point the mean of its bucket's finite values, buckets of equal size
    size = buckets.size * 2 if len(buckets.points) > CURVE_POINTS else buckets.size
    first = [v for v in values[:size] if v == v]
    assert curve[0] == [float(size), pytest.approx(sum(first) / len(first), rel=1e-5)]


@pytest.mark.parametrize("late_loss", [False, True])
def test_a_tally_keeps_the_curve_of_the_main_metric_alone(late_loss: bool) -> None:
    """The main metric is a loss, else the first name in sort order: a name that sorts first
    arrives late, then (in one case) a loss later still; the curve kept is the main metric's own,
    and no curve is kept for a name that can no longer be the main one."""
    tally = SummaryTally()
    fed: dict[str, tuple[list[int | None], list[float]]] = {}

    def run(names: list[str], steps: range) -> None:
        rows = list(steps)
        values = [(s % 7) / (1 + i) if s % 11 else math.nan for s in rows for i in range(len(names))]
        tally.add_run(names, rows, values)
        for j, name in enumerate(names):
            got = fed.setdefault(name, ([], []))
            got[0].extend(rows)
            got[1].extend(values[j :: len(names)])

    run(["c_acc", "d_lr"], range(1, 301))
    run(["b_acc", "c_acc", "d_lr"], range(301, 601))
    run(["a_acc", "b_acc"], range(601, 901))
    if late_loss:
        run(["a_acc", "train_loss"], range(901, 1201))
    main = "train_loss" if late_loss else "a_acc"
    summary = tally.summary()
    assert summary["main"] == main
    alone = CurveBuckets()
    alone.add(*fed[main])
    assert summary["curve"] == alone.curve() and summary["curve"]
    assert set(tally.curves) == {"a_acc", *(["train_loss"] if late_loss else [])}
    for name, (steps, values) in fed.items():  # last and best as the whole series has them
        finite = [(v, s) for s, v in zip(steps, values, strict=True) if v == v]
        best = (max if higher_is_better(name) else min)(v for v, _s in finite)
        assert summary["metrics"][name]["best"] == best
        assert summary["metrics"][name]["best_step"] == next(s for v, s in finite if v == best)
        assert (summary["metrics"][name]["last"], summary["metrics"][name]["last_step"]) == finite[-1]
