"""Cost per 1k training tokens and the cost of badput, from an hourly price per node."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._read.load.reader import read_store
from traincard_otel._read.payload.insights import insights_section
from traincard_otel._read.payload.status import run_status
from traincard_otel.testing import capture


def test_cost_per_1k_tokens_and_of_badput_of_a_run() -> None:
    with capture(hourly_cost=7.2) as cap:
        r = cap.reporter
        time.sleep(0.05)
        last = time.perf_counter()
        for step in range(1, 41):
            time.sleep(0.005)
            now = time.perf_counter()
            r.step_end(step, duration_s=now - last, samples=4, tokens=4 * 128, data_wait_s=0.002)
            last = now
    run = read_store(cap.store)
    ins = insights_section(run, analyse(run))
    g, cost = ins["goodput"], ins["cost"]
    assert cost["hourly"] == 7.2 and cost["nodes"] == 1
    assert cost["tokens"] == pytest.approx(40 * 512)  # each step's rate x its duration
    assert cost["so_far"] == pytest.approx(7.2 * g["wall_s"] / 3600)
    assert cost["per_1k_tokens"] == pytest.approx(cost["so_far"] / (40 * 512 / 1000))
    assert cost["badput"] == pytest.approx(7.2 * (g["wall_s"] - g["seconds"]["productive"]) / 3600)
    assert 0 < cost["badput"] < cost["so_far"]


def test_no_price_no_cost() -> None:
    with capture() as cap:
        cap.reporter.step_end(1, duration_s=0.1, tokens=10)
    assert insights_section(read_store(cap.store), analyse(read_store(cap.store)))["cost"] is None


def test_a_gang_pays_for_every_node(tmp_path: Path) -> None:
    from tests.support.runs import gang_store

    run = traincard_otel.load(gang_store(tmp_path, {r: {"status": "finished"} for r in range(4)}, []))
    ins = insights_section(run, analyse(run), hourly_cost=10.0)
    cost, g = ins["cost"], ins["goodput"]
    assert cost["nodes"] == 2
    assert cost["badput"] == pytest.approx(10.0 * 2 * g["badput_s"] / 3600)
    assert g["seconds"]["data_wait"] == pytest.approx(10 * 0.01)  # rank 0's whole-run wait
    status_cost = run_status(run, time.time(), hourly_cost=10.0)["cost"]  # the status bar agrees
    assert status_cost["nodes"] == 2 and status_cost["hourly"] == 20.0
