"""Stall, lost-rank, rewind and previous-attempt detection with real threads and a real store."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._read.payload import build_payload
from traincard_otel._schema import Attr


def _events(run: traincard_otel.RunData, name: str) -> list[dict]:
    return [e for e in run.events if e["name"] == name]


def _write_state(store: Path, attempt: int, rank: int, **fields: object) -> None:
    d = store / f"a{attempt}" / f"r{rank}" / "wfake01"
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_text(json.dumps({"attempt": attempt, "rank": rank, **fields}))


def test_stall_is_declared_while_the_loop_sleeps_and_cleared_on_progress(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINCARD_STALL_TIMEOUT", "1")
    r = traincard_otel.configure()
    for step in range(1, 6):
        r.step_end(step, duration_s=0.01)
    time.sleep(2.6)  # the training thread is "stuck"; the watchdog thread is not
    assert r.flush()
    mid = traincard_otel.load(store_dir)
    assert mid.status["stalled"] is True
    payload = build_payload(mid, live=True)
    assert payload["banners"][0]["kind"] == "stalled"
    for step in range(6, 13):  # progress again, faster than the stall timeout, however loaded the machine
        r.step_end(step, duration_s=0.01)
        time.sleep(0.2)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert len(_events(run, "traincard.stall.started")) == 1
    assert len(_events(run, "traincard.stall.cleared")) == 1
    assert run.status["stalled"] is False


def test_input_bound_steps_are_reported_as_such_not_as_stalls(store_dir: Path) -> None:
    r = traincard_otel.configure()
    for step in range(1, 30):
        r.step_end(step, duration_s=0.1, data_wait_s=0.08)
    time.sleep(1.2)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.status["input_bound_share"] == pytest.approx(0.8)
    assert not _events(run, "traincard.stall.started")
    assert any("Input-bound" in b["text"] for b in build_payload(run)["banners"])


def test_a_rank_whose_heartbeat_stopped_is_named(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("TRAINCARD_RANK_TIMEOUT", "5")
    old = time.time() - 60
    _write_state(store_dir, 0, 1, status="running", heartbeat_at=old, started_at=old, host="node-b", step=120)
    _write_state(
        store_dir, 0, 2, status="finished", heartbeat_at=old, started_at=old, host="node-c", step=200
    )
    r = traincard_otel.configure()
    r.step_end(200, duration_s=0.01)
    time.sleep(1.5)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    lost = _events(run, "traincard.rank.lost")
    assert [e["attributes"]["traincard.lost_rank"] for e in lost] == [1]  # rank 2 finished: not dead
    assert lost[0]["attributes"]["host.name"] == "node-b"
    banner = next(b for b in build_payload(run)["banners"] if b["kind"] == "degraded")
    assert "rank 1 on node-b" in banner["text"] and "step 120" in banner["text"]


def test_previous_attempt_that_vanished_near_its_memory_limit(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_state(
        store_dir,
        0,
        0,
        status="running",
        heartbeat_at=time.time() - 30,
        step=77,
        last_system={"process.memory.usage": 15.5 * 2**30, "system.memory.limit": 16 * 2**30},
    )
    monkeypatch.setenv("TRAINCARD_ATTEMPT", "1")
    r = traincard_otel.configure()
    r.step_end(70, duration_s=0.01)
    time.sleep(1.2)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    resumed = _events(run, "traincard.run.resumed")[0]["attributes"]
    assert resumed[Attr.PREVIOUS_END] == "vanished"
    assert resumed[Attr.PREVIOUS_VERDICT] == "host_oom"
    payload = build_payload(run)
    assert payload["run"]["restarts"] == 1
    text = next(b for b in payload["banners"] if b["kind"] == "resumed")["text"]
    assert "vanished" in text and "likely host out of memory" in text and "step 77" in text


def test_a_step_counter_moving_backwards_is_a_rewind_and_both_stretches_are_kept(store_dir: Path) -> None:
    r = traincard_otel.configure()
    for step in range(1, 11):
        r.metrics({"loss": 10.0 - step}, step=step)
        r.step_end(step, duration_s=0.01)
    for step in range(6, 13):  # resumed from the step-5 checkpoint
        r.metrics({"loss": 5.0 - step / 10}, step=step)
        r.step_end(step, duration_s=0.01)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    rewinds = _events(run, "traincard.run.rewind")
    assert [
        (e["attributes"]["traincard.rewind.from"], e["attributes"]["traincard.step"]) for e in rewinds
    ] == [(10, 6)]
    assert len(run.metrics["loss"]) == 17
    payload = build_payload(run)
    loss = next(c for c in payload["charts"] if c["id"] == "loss")
    assert [s["label"] for s in loss["series"]] == ["train", "train (resumed 1)"]
    assert loss["series"][0]["x"] == list(range(1, 11)) and loss["series"][1]["x"] == list(range(6, 13))
    assert any(m["kind"] == "rewind" and m["x"] == 6 for m in payload["markers"])
