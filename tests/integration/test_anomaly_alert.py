"""Debian's Prometheus, loaded with collector-config's alert rules, scraping a real loop that
meets a NaN loss: traincard_anomalies_total counts it and TrainingLossNotFinite fires."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, subprocess_env
from tests.support.otlp_receiver import free_port
from tests.support.prometheus_server import prometheus, query, wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="Debian's prometheus is not installed"
)


@pytest.mark.slow
def test_a_nan_loss_fires_the_alert_rule(tmp_path: Path) -> None:
    exporter_port = free_port()
    shutil.copy(REPO / "collector-config" / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")
    # The NaN comes once Prometheus has scraped the counter at 0: a first sample already at 1 is no
    # rise to increase(), so the rule could not fire (on a slow machine the scrapes began late).
    go = tmp_path / "plant-the-nan"
    train = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "integration" / "scripts" / "planted_nan_loop.py"),
            "--nan-at",
            "150",
            "--nan-when",
            str(go),
        ],
        env=subprocess_env(
            TRAINCARD_DIR=str(tmp_path / "store"),
            TRAINCARD_SYSTEM="false",
            TRAINCARD_FLUSH_INTERVAL="0.5",
            OTEL_METRICS_EXPORTER="prometheus",
            OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
            OTEL_EXPORTER_PROMETHEUS_PORT=str(exporter_port),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with prometheus(tmp_path, exporter_port, rules=tmp_path / "alerts.yml") as base:
            wait_for(base, 'traincard_anomalies_total{traincard_anomaly_kind="nan"} == 0', timeout=60)
            go.touch()
            counted = wait_for(
                base, 'traincard_anomalies_total{traincard_anomaly_kind="nan"} > 0', timeout=60
            )
            assert float(counted[0]["value"][1]) == 1
            alert = wait_for(
                base, 'ALERTS{alertname="TrainingLossNotFinite", alertstate="firing"}', timeout=30
            )
            assert alert[0]["metric"]["severity"] == "critical"
            # nothing else was flagged: no TrainingAnomaly for a healthy loss before and after
            assert not [r for r in query(base, "ALERTS") if r["metric"].get("alertname") == "TrainingAnomaly"]
    finally:
        train.terminate()
        train.wait(10)
