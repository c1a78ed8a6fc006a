"""Debian's Prometheus scraping a real training loop that runs with OTEL_METRICS_EXPORTER=prometheus."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, subprocess_env
from tests.support.otlp_receiver import free_port
from tests.support.prometheus_server import prometheus, wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="Debian's prometheus is not installed"
)


@pytest.mark.slow
def test_prometheus_scrapes_training_loss_and_system_metrics(tmp_path: Path) -> None:
    exporter_port = free_port()
    train = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "examples" / "raw_reporter_loop.py"),
            "--steps",
            "1500",
            "--sleep",
            "0.02",
            "--checkpoint-dir",
            str(tmp_path / "checkpoints"),
        ],
        env=subprocess_env(
            TRAINCARD_DIR=str(tmp_path / "store"),
            TRAINCARD_SYSTEM_INTERVAL="1",
            OTEL_METRICS_EXPORTER="prometheus",
            OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
            OTEL_EXPORTER_PROMETHEUS_PORT=str(exporter_port),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with prometheus(tmp_path, exporter_port) as base:
            loss = wait_for(base, 'traincard_metric{traincard_metric_name="loss"}')
            assert 0 <= float(loss[0]["value"][1]) < 100
            steps = wait_for(base, "traincard_steps_total > 10")
            assert float(steps[0]["value"][1]) > 10
            rate = wait_for(base, "rate(traincard_steps_total[5s]) > 0")
            assert float(rate[0]["value"][1]) > 1
            rss = wait_for(base, "process_memory_usage_bytes")
            assert float(rss[0]["value"][1]) > 10 * 2**20
            # "> 0" drops NaN: a window whose scrapes all fall between two drains has no new steps.
            p50_query = "histogram_quantile(0.5, rate(traincard_step_duration_seconds_bucket[10s])) > 0"
            p50 = wait_for(base, p50_query)
            assert 0.005 < float(p50[0]["value"][1]) < 1.0
            info = wait_for(base, "target_info")
            assert info[0]["metric"].get("traincard_rank") == "0"
    finally:
        train.terminate()
        train.wait(10)
