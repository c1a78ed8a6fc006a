"""Comparison with a baseline run, from real pipelines' stores: the figures, the card section and
``load(..., baseline=)`` outside Metaflow (the Metaflow lookups: tests/integration/test_baseline_flow.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._analysis.baseline import Baseline, main_metric
from traincard_otel._config import baseline_spec, resolve
from traincard_otel._data.rundata import RunData
from traincard_otel._read.baseline import load_baseline
from traincard_otel._read.payload import LIVE_MAX_BYTES, build_payload
from traincard_otel._read.payload.baseline import FULL_POINTS, LIVE_POINTS
from traincard_otel._read.run import LoadedRun
from traincard_otel.testing import capture


def _run(steps: int, scale: float, step_s: float, evals: int = 0) -> LoadedRun:
    """A real pipeline's store: loss = scale / step, every step timed ``step_s``."""
    with capture() as cap:
        r = cap.reporter
        with r.phase("train"):
            for s in range(1, steps + 1):
                r.metrics({"loss": scale / s, "learning_rate": 1e-3}, step=s)
                r.step_end(s, duration_s=step_s, samples=8)
                if evals and s % evals == 0:
                    r.metrics({"eval_loss": 1.2 * scale / s}, step=s)
        return cap.load()


def _write_store(path: Path, steps: int, scale: float, step_s: float) -> None:
    traincard_otel.configure(store=str(path), system=False, capture_console=False)
    r = traincard_otel.Reporter()
    with r.phase("train"):
        for s in range(1, steps + 1):
            r.metrics({"loss": scale / s}, step=s)
            r.step_end(s, duration_s=step_s, samples=8)
    traincard_otel.shutdown()


def test_main_metric_is_the_training_loss() -> None:
    assert main_metric(["learning_rate", "eval_loss", "loss"]) == "loss"
    assert main_metric(["train_loss", "eval_loss"]) == "train_loss"
    assert main_metric(["val_loss", "eval/loss", "lm_loss"]) == "lm_loss"
    assert main_metric(["accuracy", "eval_loss"]) is None


def test_a_worse_slower_run_is_behind_by_how_much() -> None:
    base = _run(100, scale=1.0, step_s=0.020)
    run = _run(60, scale=1.25, step_s=0.025)
    cmp = run.compare(base, label="Flow/1/train/2")
    assert cmp is not None and cmp.step == 60
    assert cmp.metric is not None and cmp.metric.verdict == "behind"
    assert cmp.metric.relative == pytest.approx(0.25, rel=1e-9)  # the same steps, 1.25x the loss
    # the mean of 1.25/s against the mean of 1/s over steps 41..60
    mine = sum(1.25 / s for s in range(41, 61)) / 20
    theirs = sum(1 / s for s in range(41, 61)) / 20
    assert cmp.metric.text == f"loss behind baseline at step 60: {mine:.4g} vs {theirs:.4g} (25 % higher)"
    assert cmp.step_time is not None and cmp.step_time.verdict == "behind"
    assert cmp.step_time.relative == pytest.approx(0.25)
    assert cmp.step_time.text == "time per step behind baseline at step 60: 25 ms vs 20 ms (25 % slower)"

    better = _run(60, scale=0.9, step_s=0.016).compare(base, label="b")
    assert better is not None and better.metric is not None and better.step_time is not None
    assert (better.metric.verdict, better.step_time.verdict) == ("ahead", "ahead")
    assert "10 % lower" in better.metric.text and "20 % faster" in better.step_time.text

    close = _run(60, scale=1.075, step_s=0.020).compare(base, label="b")
    assert close is not None and close.metric is not None and close.metric.text.endswith("(7.5 % higher)")

    same = _run(60, scale=1.0, step_s=0.020).compare(base, label="b")
    assert same is not None and same.metric is not None and same.metric.verdict == "level"
    assert "level with baseline" in same.metric.text


def test_a_baseline_that_stopped_earlier_says_so_and_compares_the_step_time_only() -> None:
    base = _run(30, scale=1.0, step_s=0.02)
    cmp = _run(120, scale=1.0, step_s=0.01).compare(base, label="Flow/1/train/2")
    assert cmp is not None and cmp.metric is None
    assert cmp.notes == ("Flow/1/train/2 ended at step 30, before step 120",)
    assert cmp.step_time is not None and cmp.step_time.verdict == "ahead"  # its typical step: 20 ms


def test_payload_overlays_decimated_baseline_curves_and_the_status(tmp_path: Path) -> None:
    base = _run(5000, scale=1.0, step_s=0.02, evals=250)
    run = _run(400, scale=1.1, step_s=0.02, evals=200)
    b = Baseline(label="TrainFlow/7/train/3", data=base, run_id="7")
    full = build_payload(run, baseline=b)["baseline"]
    assert full["label"] == "TrainFlow/7/train/3" and full["name"] == "baseline 7" and full["note"] is None
    by_label = {s["label"]: s for s in full["series"]}
    assert set(by_label) == {"train \u00b7 baseline 7", "eval \u00b7 baseline 7"}
    train = by_label["train \u00b7 baseline 7"]
    assert train["chart"] == "loss" and train["role"] == "train"
    assert len(train["x"]) <= FULL_POINTS and train["x"][0] == 1 and train["x"][-1] == 5000
    assert min(train["y"]) == pytest.approx(1 / 5000, rel=1e-5) and max(train["y"]) == 1.0  # extremes kept
    assert by_label["eval \u00b7 baseline 7"]["x"] == [250 * k for k in range(1, 21)]
    [metric, step_time] = full["status"]
    assert metric["kind"] == "metric" and metric["verdict"] == "behind" and metric["step"] == 400
    assert "10 % higher" in metric["text"]
    assert step_time["kind"] == "step_time" and step_time["verdict"] == "level"

    live = build_payload(run, live=True, baseline=b)
    assert all(len(s["x"]) <= LIVE_POINTS for s in live["baseline"]["series"])
    assert len(json.dumps(live)) <= LIVE_MAX_BYTES
    # the same baseline decimated once: the same lists come back
    again = build_payload(run, baseline=b)["baseline"]["series"][0]
    assert again["x"] is full["series"][0]["x"]


def test_a_missing_baseline_is_a_note_and_none_is_nothing() -> None:
    run = _run(10, scale=1.0, step_s=0.01)
    note = build_payload(run, baseline=Baseline(label="auto", note="no earlier successful run of F/train"))
    assert note["baseline"]["note"] == "no earlier successful run of F/train"
    assert note["baseline"]["series"] == [] and note["baseline"]["status"] == []
    assert build_payload(run)["baseline"] is None


def test_setting_resolution() -> None:
    assert resolve(environ={}).baseline == "auto"
    assert resolve(environ={"TRAINCARD_BASELINE": ""}).baseline == "none"
    assert resolve(environ={"TRAINCARD_BASELINE": " Flow/12/train "}).baseline == "Flow/12/train"
    assert resolve({"baseline": ""}, environ={"TRAINCARD_BASELINE": "Flow/1/train"}).baseline == "none"
    assert (
        resolve({"baseline": "Flow/2/train"}, environ={"TRAINCARD_BASELINE": "none"}).baseline
        == "Flow/2/train"
    )
    assert [baseline_spec(v) for v in (None, "AUTO", "off", "None", "123")] == [
        "auto",
        "auto",
        "none",
        "none",
        "123",
    ]


def test_load_with_a_baseline_folder(tmp_path: Path) -> None:
    _write_store(tmp_path / "base", 80, scale=1.0, step_s=0.02)
    _write_store(tmp_path / "run", 50, scale=0.8, step_s=0.02)
    run = traincard_otel.load(tmp_path / "run", baseline=str(tmp_path / "base"))
    assert run.baseline is not None and run.baseline.note is None
    assert run.baseline.data.metrics["loss"].steps[-1] == 80
    cmp = run.compare()
    assert cmp is not None and cmp.metric is not None and cmp.metric.verdict == "ahead"
    assert traincard_otel.load(tmp_path / "run").baseline is None  # no baseline unless asked

    auto = traincard_otel.load(tmp_path / "run", baseline="auto").baseline
    assert auto is not None and auto.data is None
    assert auto.note == "no baseline: this run is not a Metaflow task (name one with the baseline setting)"
    missing = load_baseline(None, str(tmp_path / "nowhere"))
    assert missing is not None and missing.data is None
    assert (
        missing.note
        == f"baseline {tmp_path / 'nowhere'} could not be read: no such folder, and not a Metaflow pathspec"
    )
    (tmp_path / "empty").mkdir()
    empty = load_baseline(None, str(tmp_path / "empty"))
    assert (
        empty is not None
        and empty.note == f"baseline {tmp_path / 'empty'} could not be read: it holds no traincard telemetry"
    )
    assert load_baseline(None, "none") is None


def test_a_card_render_waits_for_its_baseline_only_so_long(tmp_path: Path) -> None:
    import os
    import threading

    _write_store(tmp_path / "slow", 10, scale=1.0, step_s=0.01)
    [state] = list((tmp_path / "slow").rglob("state.json"))
    state.unlink()
    os.mkfifo(state)  # reading it blocks until someone opens it for writing: a stuck datastore
    try:
        got = load_baseline(None, str(tmp_path / "slow"), timeout_s=0.5)
        assert got is not None and got.data is None
        assert got.note == f"baseline {tmp_path / 'slow'} could not be read: not within 0.5 s"
    finally:
        release = threading.Thread(target=lambda: open(state, "wb").close(), daemon=True)
        release.start()
        release.join(5)


def test_the_refresher_reads_its_baseline_once_on_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from traincard_otel._read import baseline as baseline_lookup
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel.metaflow.refresher import Refresher

    _write_store(tmp_path / "base", 80, scale=1.0, step_s=0.02)
    _write_store(tmp_path / "run", 50, scale=1.3, step_s=0.02)
    pushed: list[dict[str, object]] = []

    class Card:
        def refresh(self, payload: dict[str, object]) -> None:
            pushed.append(payload)

    reads: list[object] = []
    real_read = baseline_lookup.read

    def counted(target: object) -> tuple[RunData, str | None]:
        reads.append(target)
        return real_read(target)

    monkeypatch.setattr(baseline_lookup, "read", counted)
    refresher = Refresher(
        LocalBackend(str(tmp_path / "run")),
        "run",
        3600.0,
        cards=lambda: [Card()],
        busy=lambda c: False,
        baseline=str(tmp_path / "base"),
    ).start()
    refresher._baseline_thread.join(10)
    assert refresher.push() and refresher.push()
    refresher.stop()
    assert reads == [str(tmp_path / "base")]  # read once, kept for every push
    for payload in pushed:
        b = payload["baseline"]
        assert isinstance(b, dict) and b["label"] == str(tmp_path / "base")
        assert [f["verdict"] for f in b["status"]] == ["behind", "level"]
    assert refresher.baseline is not None and set(refresher.baseline.data.metrics) == {"loss"}  # slim
    assert "TRAINCARD_BASELINE" not in os.environ  # the final card finds it itself: nothing is passed on
