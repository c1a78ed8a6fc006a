"""Debian's Prometheus for tests: a server scraping one exporter, and PromQL queries against it."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.otlp_receiver import free_port


@contextmanager
def prometheus(tmp_path: Path, exporter_port: int, rules: Path | None = None) -> Iterator[str]:
    """Run Prometheus scraping ``127.0.0.1:exporter_port`` every second (with ``rules`` loaded);
    yields its base URL."""
    prom_port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        + (f"rule_files: [{rules}]\n" if rules else "")
        + "scrape_configs:\n"
        f"  - job_name: training\n    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n"
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
    try:
        yield f"http://127.0.0.1:{prom_port}"
    finally:
        prom.terminate()
        prom.wait(10)


def query(base: str, promql: str) -> list[dict[str, Any]]:
    """The result vector of ``promql`` now."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def wait_for(base: str, promql: str, timeout: float = 40) -> list[dict[str, Any]]:
    """The first non-empty result of ``promql`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = query(base, promql)
        except OSError:
            result = []
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"no result for {promql}")
