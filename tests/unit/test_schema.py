"""Every metric name the code emits is listed in docs/schema.md (statically and at run time)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO
from tests.support.schema_names import otel_metric_names

_CREATE = re.compile(
    r"create_(?:observable_)?(?:gauge|counter|up_down_counter|histogram)\(\s*\"([^\"]+)\"", re.S
)
# A quoted dotted name with a wire-name prefix (ours or a semantic convention's), anywhere in the
# package but the schema package itself; the start of a quoted name counts too (``"hw.gpu.x{"``).
_PREFIXES = "traincard|training|node|metaflow|system|process|hw|host|service|error|exception|disk|network|log"
_NAME = re.compile(rf"[\"']((?:{_PREFIXES})\.[a-z_]+(?:\.[a-z_]+)*)[\"'{{\[]")
# Dotted literals with those prefixes that are not wire names.
_NOT_WIRE_NAMES = {"traincard.html": "the CLI's default output file"}


def test_the_schema_page_is_generated_from_the_schema_module() -> None:
    from traincard_otel._schema import render_markdown

    assert (REPO / "docs" / "schema.md").read_text() == render_markdown(), (
        "docs/schema.md is stale: run `python -m traincard_otel._schema > docs/schema.md`"
    )


def _spelled_names(text: str) -> set[str]:
    return (set(_NAME.findall(text)) | set(_CREATE.findall(text))) - set(_NOT_WIRE_NAMES)


def test_no_module_spells_a_wire_name() -> None:
    """Event names, attribute keys and instruments come from _schema, never as literals: a dotted
    name with a wire prefix anywhere else in the package fails, whether _schema owns it or not."""
    spelled: dict[str, set[str]] = {}
    for path in (REPO / "traincard_otel").rglob("*.py"):
        if "_schema" in path.relative_to(REPO).parts:
            continue
        for name in _spelled_names(path.read_text()):
            spelled.setdefault(name, set()).add(str(path.relative_to(REPO)))
    assert spelled == {}


def test_the_literal_check_finds_the_ways_a_name_was_spelled() -> None:
    """The check above can fail: each way a wire name used to be written is caught."""
    for text in (
        'Sample("hw.gpu.utilization", 0.5, "1", "gauge")',
        "attrs['process.exit.code'] = 1",
        'last.get("system.memory.utilization{system.memory.state=used}")',
        'key = "hw.errors[gpu0]"',
        'meter.create_gauge(\n "traincard.mfu")',
        '{"host.name": socket.gethostname()}',
    ):
        assert _spelled_names(text), text
    assert _spelled_names('p.add_argument("-o", default="traincard.html")') == set()
    assert _spelled_names('name.startswith(("process.", "system."))') == set()


def test_every_key_the_schema_builds_it_also_parses() -> None:
    from traincard_otel._schema.keys import reading_key, series_key, split_reading_key

    attrs = {"hw.id": "gpu1", "hw.name": "H100", "error.type": "corrected"}
    assert reading_key("hw.errors", attrs) == "hw.errors[gpu1]{error.type=corrected}"
    assert split_reading_key(reading_key("hw.errors", attrs)) == (
        "hw.errors",
        "gpu1",
        {"error.type": "corrected"},
    )
    assert series_key("loss", {"split": "val", "a": "1"}) == "loss{a=1,split=val}"
    assert split_reading_key(series_key("loss", {"split": "val"})) == ("loss", None, {"split": "val"})
    assert series_key("loss", None) == series_key("loss", {}) == "loss"


def test_every_instrument_created_in_code_is_in_the_schema() -> None:
    """Instruments are created from _schema's specs (a literal name would bypass them)."""
    from traincard_otel._schema import ALL_METRICS

    created: set[str] = set()
    for path in (REPO / "traincard_otel").rglob("*.py"):
        created |= set(_CREATE.findall(path.read_text()))
    assert created - {m.name for m in ALL_METRICS} == set()
    assert {m.name for m in ALL_METRICS} == otel_metric_names()


def test_every_metric_stored_at_run_time_is_documented(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The store's metric points are the system figures; what every metric backend receives is
    checked against this page in tests/integration/test_otlp_export.py."""
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
    stored = {s.name for s in run.system.values()}
    assert {"system.cpu.utilization", "process.memory.usage"} <= stored
    assert stored - otel_metric_names() == set()
    # The run's own figures are in the store's rows, events and state: without a metric backend
    # they are not collected as metrics a second time.
    assert not [n for n in stored if n.startswith("traincard.")]
    assert run.step_times[0].values == [0.01] * 19


def test_system_instrument_table_is_documented_with_its_kind_and_unit() -> None:
    from traincard_otel._write.telemetry.instruments import SYSTEM_INSTRUMENTS

    text = (REPO / "docs" / "schema.md").read_text()
    for name, kind, unit in SYSTEM_INSTRUMENTS:
        assert re.search(rf"^\| `{re.escape(name)}` \| {kind} \| `{re.escape(unit)}` \|", text, re.M), name


def test_every_event_is_documented_once() -> None:
    from traincard_otel._schema import event_names
    from traincard_otel._schema.doc import _EVENTS_DOC

    documented = [name for name, _doc in _EVENTS_DOC]
    assert sorted(documented) == sorted(event_names())
