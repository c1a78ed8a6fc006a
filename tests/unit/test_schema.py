"""Every metric name the code emits is listed in docs/schema.md (statically and at run time)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO

import traincard_otel

_ROW = re.compile(r"^\|\s*`([a-z][a-z0-9_.]+)`\s*\|\s*(gauge|counter|updowncounter|histogram)\s*\|", re.M)
_CREATE = re.compile(
    r"create_(?:observable_)?(?:gauge|counter|up_down_counter|histogram)\(\s*\"([^\"]+)\"", re.S
)


def documented() -> set[str]:
    return {name for name, _kind in _ROW.findall((REPO / "docs" / "schema.md").read_text())}


def test_every_instrument_created_in_code_is_documented() -> None:
    created: set[str] = set()
    for path in (REPO / "traincard_otel").rglob("*.py"):
        created |= set(_CREATE.findall(path.read_text()))
    assert created, "no instruments found: the pattern is stale"
    assert created - documented() == set()


def test_every_metric_exported_at_run_time_is_documented(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRAINCARD_SYSTEM", "true")
    monkeypatch.setenv("TRAINCARD_SYSTEM_INTERVAL", "0.2")
    (tmp_path / "ck").write_bytes(b"x" * 10)
    r = traincard_otel.configure()
    for step in range(1, 20):
        r.metrics({"loss": 1.0 / step}, step=step)
        r.step_end(step, duration_s=0.01, samples=2, tokens=20)
    r.checkpoint(tmp_path / "ck", step=19)
    import time

    time.sleep(0.6)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    emitted = {s.name for s in run.system.values()}
    assert {"traincard.steps", "traincard.checkpoints", "system.cpu.utilization"} <= emitted
    assert emitted - documented() == set()
    # Every step's duration is in the store's step rows; the histogram aggregate is fed only when a
    # metric exporter reads it (OTLP and Prometheus tests check that side).
    assert "traincard.step.duration" not in emitted
    assert run.step_times[0].values == [0.01] * 19


def test_system_instrument_table_is_documented_with_its_kind_and_unit() -> None:
    from traincard_otel.telemetry.instruments import SYSTEM_INSTRUMENTS

    text = (REPO / "docs" / "schema.md").read_text()
    for name, kind, unit in SYSTEM_INSTRUMENTS:
        assert re.search(rf"^\| `{re.escape(name)}` \| {kind} \| `{re.escape(unit)}` \|", text, re.M), name
