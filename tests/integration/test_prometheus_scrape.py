"""Debian's Prometheus scraping a real training loop that runs with OTEL_METRICS_EXPORTER=prometheus."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, subprocess_env
from otlp_receiver import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="Debian's prometheus is not installed"
)


def _query(base: str, promql: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait_for(base: str, promql: str, timeout: float = 40) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = _query(base, promql)
        except OSError:
            result = []
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"no result for {promql}")


@pytest.mark.slow
def test_prometheus_scrapes_training_loss_and_system_metrics(tmp_path: Path) -> None:
    exporter_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: training\n    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
    )
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
    prom = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{prom_port}"
    try:
        loss = _wait_for(base, 'traincard_metric{traincard_metric_name="loss"}')
        assert 0 <= float(loss[0]["value"][1]) < 100
        steps = _wait_for(base, "traincard_steps_total > 10")
        assert float(steps[0]["value"][1]) > 10
        rate = _wait_for(base, "rate(traincard_steps_total[5s]) > 0")
        assert float(rate[0]["value"][1]) > 1
        rss = _wait_for(base, "process_memory_usage_bytes")
        assert float(rss[0]["value"][1]) > 10 * 2**20
        # "> 0" drops NaN: a window whose scrapes all fall between two drains has no new steps.
        p50_query = "histogram_quantile(0.5, rate(traincard_step_duration_seconds_bucket[10s])) > 0"
        p50 = _wait_for(base, p50_query)
        assert 0.005 < float(p50[0]["value"][1]) < 1.0
        info = _wait_for(base, "target_info")
        assert info[0]["metric"].get("traincard_rank") == "0"
    finally:
        prom.terminate()
        train.terminate()
        prom.wait(10)
        train.wait(10)
