"""The card's insights section from a real pipeline's store: MFU figures and chart, markers."""

from __future__ import annotations

import statistics

import pytest

from traincard_otel._analysis.analysis import analyse
from traincard_otel._analysis.efficiency import efficiency
from traincard_otel._read.load.reader import RunData, read_store
from traincard_otel._read.payload import build_payload
from traincard_otel._read.payload.insights import insights_section
from traincard_otel.testing import capture


def _loop(peak: float | None) -> RunData:
    with capture() as cap:
        r = cap.reporter
        r.progress(flops_per_token=6e6, attention_flops_per_position=1e4, peak_flops=peak, peak_source="test")
        for step in range(1, 61):
            r.step_end(step, duration_s=0.05 + 0.001 * (step % 5), samples=8, tokens=8 * 128)
    return read_store(cap.store)


def test_mfu_from_the_adapter_fields_and_the_measured_throughput() -> None:
    run = _loop(1e12)
    found = efficiency(run)
    assert found is not None
    e = found.as_dict()
    rates = run.throughput["tokens_per_second{rank=0}"].values
    tokens = statistics.median(rates[-50:])
    assert e["seq_len"] == pytest.approx(128)
    assert e["flops_per_token"] == pytest.approx(6e6 + 1e4 * 128)
    assert e["achieved_flops"] == pytest.approx(e["flops_per_token"] * tokens)
    assert e["mfu"] == pytest.approx(e["flops_per_token"] * tokens / 1e12)
    assert e["accelerators"] == 1 and e["ranks"][0]["mfu"] == pytest.approx(e["mfu"])
    chart = next(c for c in build_payload(run)["charts"] if c["id"] == "mfu")
    assert chart["unit"] == "%" and chart["series"][0]["x"] == list(range(1, 61))
    assert chart["series"][0]["y"] == pytest.approx([100 * v * e["flops_per_token"] / 1e12 for v in rates])


def test_unknown_peak_has_flops_but_no_mfu_and_no_chart() -> None:
    run = _loop(None)
    found = efficiency(run)
    e = found.as_dict() if found else None
    assert e is not None and e["mfu"] is None and e["achieved_flops"] > 0
    assert not [c for c in build_payload(run)["charts"] if c["id"] == "mfu"]


def test_a_run_without_insights_has_an_empty_section() -> None:
    with capture() as cap:
        cap.reporter.metrics({"accuracy": 0.5}, step=1)
    run = read_store(cap.store)
    ins = insights_section(run, analyse(run))
    assert ins == {
        "attention": [],
        "attention_total": 0,
        "goodput": None,
        "efficiency": None,
        "mfu_hint": None,
        "cost": None,
    }
