"""The `traincard` command line, and the store exporters selected by name through OTel's configurator."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import traincard_otel
from traincard_otel._cli import main

from tests.support.helpers import subprocess_env


def _record(store_dir: Path) -> None:
    r = traincard_otel.configure()
    for s in range(1, 6):
        r.metrics({"loss": 1.0 / s}, step=s)
    r.log("hello from the loop")
    traincard_otel.shutdown()


def test_render_ls_tail_export(store_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _record(store_dir)
    out = tmp_path / "card.html"
    assert main(["render", str(store_dir), "-o", str(out)]) == 0
    html = out.read_text()
    assert 'id="tc-payload"' in html and not re.search(r"window\.metaflow_card_update\s*=", html)
    assert main(["ls", str(store_dir)]) == 0
    assert "loss: 5 points" in capsys.readouterr().out
    assert main(["tail", str(store_dir)]) == 0
    tail = capsys.readouterr().out
    assert "finished" in tail and "hello from the loop" in tail and "phase=None" not in tail
    csv_path = tmp_path / "m.csv"
    assert main(["export", str(store_dir), "-o", str(csv_path)]) == 0
    rows = list(csv.DictReader(csv_path.open()))
    assert [float(r["value"]) for r in rows] == [1.0 / s for s in range(1, 6)]
    assert main(["export", str(store_dir), "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[0])["metric"] == "loss"


def test_store_exporters_selected_by_name_through_the_sdk_configurator(tmp_path: Path) -> None:
    store = tmp_path / "store"
    script = tmp_path / "auto.py"
    script.write_text(
        textwrap.dedent(
            """
        from opentelemetry import trace, metrics
        from opentelemetry.sdk._configuration import _OTelSDKConfigurator
        _OTelSDKConfigurator().configure()
        with trace.get_tracer("app").start_as_current_span("work"):
            metrics.get_meter("app").create_counter("app.items").add(3)
        """
        )
    )
    env = subprocess_env(
        TRAINCARD_DIR=str(store),
        OTEL_TRACES_EXPORTER="traincard",
        OTEL_METRICS_EXPORTER="traincard",
        OTEL_LOGS_EXPORTER="traincard",
    )
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    run = traincard_otel.load(store)
    assert [p["n"] for p in run.phases] == ["work"]
    assert any(s.name == "app.items" for s in run.system.values())
