"""Goodput and MFU reach an OTLP backend as gauges, computed by the training process from what its
converter saw, and equal to what the card computes from the store (one attempt: the same figures):
a real Metaflow flow training a tiny GPT-2 in a raw loop, exporting to a receiver in the test."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import REPO, metaflow_client, subprocess_env
from tests.support.otlp_receiver import http_receiver

pytest.importorskip("metaflow")
pytest.importorskip("transformers")

PEAK = 1e12  # FLOP/s, set through TRAINCARD_PEAK_FLOPS (a CPU has no table entry)


def _last(metrics: list[dict[str, Any]], name: str) -> dict[tuple[tuple[str, Any], ...], float]:
    """The newest value of each attribute set of metric ``name``."""
    out: dict[tuple[tuple[str, Any], ...], float] = {}
    for m in metrics:
        if m["name"] == name:
            for p in m["points"]:
                out[tuple(sorted(p["attributes"].items()))] = p["value"]
    return out


@pytest.mark.slow
def test_goodput_and_mfu_gauges_match_the_card(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "integration" / "flows" / "mfu_flow.py", tmp_path / "mfu_flow.py")
    shutil.copy(REPO / "examples" / "tiny_gpt2.py", tmp_path / "tiny_gpt2.py")
    with http_receiver() as (endpoint, got):
        env = subprocess_env(
            METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path),
            TRAINCARD_SYSTEM="false",
            TRAINCARD_PEAK_FLOPS=str(PEAK),
            OTEL_METRICS_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_METRIC_EXPORT_INTERVAL="500",
        )
        proc = subprocess.run(
            [sys.executable, "mfu_flow.py", "--no-pylint", "run"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        time.sleep(0.2)
    match = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-3000:]
    code = (
        "from traincard_otel._read.payload.insights import insights_section\n"
        "from traincard_otel._analysis.analysis import analyse\n"
        "run = traincard_otel.load(metaflow.Task(sys.argv[1]))\n"
        "ins = insights_section(run, analyse(run, now=0.0))\n"
        "print(json.dumps({'progress': run.status['progress'], 'efficiency': ins['efficiency'],\n"
        "                  'goodput': run.goodput.as_dict()}))"
    )
    card = metaflow_client(code, f"MfuFlow/{match.group(1)}/train/{match.group(2)}", tmp_path, env)

    # The model given to instrument() gave its FLOPs per token: 6 x 108,288 parameters (dense),
    # 12 x 2 layers x 64 hidden per position of the 32-token sequences the card measured.
    assert card["progress"]["flops_per_token"] == 6 * 108_288
    assert card["progress"]["attention_flops_per_position"] == 12 * 2 * 64
    eff = card["efficiency"]
    assert eff["seq_len"] == pytest.approx(32) and eff["flops_per_token"] == pytest.approx(698_880)
    rank0 = eff["ranks"][0]
    assert rank0["mfu"] == pytest.approx(698_880 * rank0["tokens_per_s"] / PEAK)

    # The gauges hold what the training process's converter saw at the last export.
    mfu = _last(got.metrics, "traincard.mfu")
    assert list(mfu) == [(("traincard.rank", 0),)]
    assert mfu[(("traincard.rank", 0),)] == pytest.approx(rank0["mfu"], rel=0.25)
    flops = _last(got.metrics, "traincard.model.flops")
    assert flops[(("traincard.rank", 0),)] == pytest.approx(rank0["achieved_flops"], rel=0.25)
    seconds = {
        dict(k)["traincard.goodput.category"]: v
        for k, v in _last(got.metrics, "traincard.goodput.time").items()
    }
    assert set(seconds) == set(card["goodput"]["seconds"])  # every category, zeros included
    assert seconds["productive"] == pytest.approx(card["goodput"]["seconds"]["productive"], rel=0.1)
    assert seconds["productive"] > 2.0 and seconds["startup"] > 0
    (ratio,) = _last(got.metrics, "traincard.goodput.share").values()
    assert 0 < ratio < 1


_NO_CARD = """
import sys, time
import traincard_otel

traincard_otel.configure(store=sys.argv[1], system=False, capture_console=False)
r = traincard_otel.Reporter()
r.progress(flops_per_token=6e6, peak_flops=1e12, peak_source="test")
with r.phase("train"):
    for step in range(1, 61):
        time.sleep(0.02)
        r.step_end(step, duration_s=0.02, samples=8, tokens=8 * 128)
time.sleep(1.0)  # a few metric exports while the run goes on
traincard_otel.shutdown()
"""


def _no_card(store: str) -> list[dict[str, Any]]:
    """The metrics received from the loop above, writing to ``store`` (``off``: no store)."""
    with http_receiver() as (endpoint, got):
        env = subprocess_env(
            OTEL_METRICS_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_METRIC_EXPORT_INTERVAL="300",
            TRAINCARD_FLUSH_INTERVAL="0.2",
        )
        proc = subprocess.run(
            [sys.executable, "-c", _NO_CARD, store], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        time.sleep(0.2)
    return got.metrics


def test_a_process_without_a_card_exports_goodput_and_mfu(tmp_path: Path) -> None:
    """No Metaflow and no live card: the same gauges as the store's figures when read."""
    store = tmp_path / "store"
    metrics = _no_card(str(store))
    import traincard_otel

    run = traincard_otel.load(store)
    assert run.insights is not None and run.insights.efficiency is not None and run.goodput is not None
    rank0 = run.insights.efficiency.ranks[0]
    mfu = _last(metrics, "traincard.mfu")
    assert list(mfu) == [(("traincard.rank", 0),)]
    assert mfu[(("traincard.rank", 0),)] == pytest.approx(rank0.mfu, rel=0.25)
    seconds = {
        dict(k)["traincard.goodput.category"]: v for k, v in _last(metrics, "traincard.goodput.time").items()
    }
    assert set(seconds) == set(run.goodput.seconds)
    assert seconds["productive"] == pytest.approx(run.goodput.seconds["productive"], rel=0.2)
    (ratio,) = _last(metrics, "traincard.goodput.share").values()
    assert 0 < ratio < 1


def test_without_a_store_the_gauges_come_from_the_converter_alone() -> None:
    """With the store off there is nothing to read back: the figures are the converter's."""
    metrics = _no_card("off")
    # 8 x 128 tokens in each 0.02 s step: 51,200 tokens/s at 6e6 FLOPs a token, of a 1e12 peak.
    assert _last(metrics, "traincard.mfu") == {(("traincard.rank", 0),): pytest.approx(0.3072)}
    assert _last(metrics, "traincard.model.flops") == {(("traincard.rank", 0),): pytest.approx(3.072e11)}
    seconds = {
        dict(k)["traincard.goodput.category"]: v for k, v in _last(metrics, "traincard.goodput.time").items()
    }
    assert seconds["productive"] == pytest.approx(60 * 0.02, rel=0.05) and seconds["shutdown"] > 0.5
    (ratio,) = _last(metrics, "traincard.goodput.share").values()
    assert ratio == pytest.approx(seconds["productive"] / sum(seconds.values()), rel=1e-3)  # (read apart)
