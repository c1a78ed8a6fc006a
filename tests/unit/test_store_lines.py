"""Log lines written straight into the store (no log exporter configured) are the records the
OTel SDK's path stores, attribute limits included; any other log reader sends them through the SDK."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from opentelemetry.sdk._logs import LogRecordDroppedAttributesWarning
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from traincard_otel._read.load.reader import read_store
from traincard_otel._schema import Attr, LogLines, StoreKind
from traincard_otel._store import segment
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.report.reporter import Reporter
from traincard_otel.testing import MemoryBackend

LIMITS = {
    "defaults": {},
    "value length": {"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "4"},
    "log record count": {"OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT": "2"},
    "no attributes": {"OTEL_ATTRIBUTE_COUNT_LIMIT": "0"},
}


def _report(reporter: Reporter) -> None:
    reporter.log("{'loss': 0.5, 'grad_norm': 1.25, 'learning_rate': 5e-05, 'epoch': 0.1}")
    reporter.log("a warning", "WARNING", attributes={"source": "warnings", "category": "UserWarning"})
    reporter.event("between", {"n": 1})
    reporter.log("Traceback: boom", "ERROR", traceback="Traceback (most recent call last):\n  x\nValueError")
    reporter.log("bad bytes \udce2 and é", attributes={"stream": "stdout", "": "empty key"})
    reporter.log("odd", "CHATTY", attributes={"nested": {"a": [1, 2]}, "none": None, "n": 3})  # type: ignore[dict-item]


@contextmanager
def _running(backend: MemoryBackend) -> Iterator[_pipeline.Pipeline]:
    """A run's pipeline into ``backend`` (no log reader attached, unlike ``testing.capture``)."""
    pipeline = _pipeline.start(backend=backend, system=False, flush_interval_s=3600.0, capture_console=False)
    assert pipeline is not None
    try:
        yield pipeline
    finally:
        _pipeline.shutdown()


def _stored(direct: bool, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> list[dict[str, object]]:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    warnings.simplefilter("ignore", LogRecordDroppedAttributesWarning)  # the limits' cuts (undone by pytest)
    backend = MemoryBackend()
    with _running(backend) as pipeline:
        assert pipeline.converter.store_lines is not None
        sdk_logs = InMemoryLogRecordExporter()
        if not direct:
            pipeline.add_log_processor(SimpleLogRecordProcessor(sdk_logs))
            assert pipeline.converter.store_lines is None
        _report(Reporter._bound(pipeline))
        assert pipeline.flush()
        if not direct:  # the attached reader saw every line
            assert sum(1 for r in sdk_logs.get_finished_logs() if not r.log_record.event_name) == 5
        records = [
            record
            for name, data in sorted(backend.objects.items())
            if name.endswith(".jsonl")
            for record in segment.decode(data)[0]
        ]
    kept = [r for r in records if r["k"] == StoreKind.LOG or r.get("n") == "between"]
    assert len(kept) == 6
    return kept


@pytest.mark.parametrize("limits", list(LIMITS))
def test_lines_straight_into_the_store_are_what_the_sdk_path_stores(
    limits: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = _stored(True, monkeypatch, LIMITS[limits])
    through_sdk = _stored(False, monkeypatch, LIMITS[limits])
    # times differ between the two runs; everything else is the same, in the same order
    strip = [{k: v for k, v in r.items() if k != "t"} for r in direct]
    assert strip == [{k: v for k, v in r.items() if k != "t"} for r in through_sdk]
    assert [r.get("msg", r.get("n")) for r in direct][2] == "between"  # lines keep their place
    by_message = {r.get("msg"): r for r in direct}
    assert by_message["Traceback: boom"]["lvl"] == "ERROR"
    if limits == "value length":
        assert by_message["a warning"]["a"] == {"source": "warn", "category": "User"}
    if limits == "no attributes":
        assert all(not r.get("a") for r in direct if r["k"] == StoreKind.LOG)


def test_a_line_whose_attributes_are_cut_warns_as_the_sdk_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOGRECORD_ATTRIBUTE_COUNT_LIMIT", "1")
    with _running(MemoryBackend()) as pipeline:
        Reporter._bound(pipeline).log("x", attributes={"a": "1", "b": "2"})
        with pytest.warns(LogRecordDroppedAttributesWarning):
            pipeline.converter.drain()


def test_a_configured_log_exporter_gets_the_lines_through_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "console")
    with _running(MemoryBackend()) as pipeline:
        assert pipeline.providers.exports_logs
        assert pipeline.converter.store_lines is None


def _batches(pipeline: _pipeline.Pipeline) -> None:
    """Two reads of the console pipe, as console capture queues them: each one report of columns."""
    attrs = {Attr.RANK: "0", Attr.LOG_STREAM: "stdout"}
    tb = "Traceback (most recent call last):\n  x\nValueError: bad"
    pipeline.queue.put(
        LogLines(
            [1.5, 1.6, 1.7],
            ["INFO", "WARNING", "ERROR"],
            ["a", "b \udce2", "ValueError: bad"],
            {2: tb},
            attrs,
        )
    )
    Reporter._bound(pipeline).event("between", {"n": 1})
    pipeline.queue.put(LogLines([2.5], ["INFO"], ["{'loss': 0.5}"], {}, attrs))


def _stored_batches(
    direct: bool, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> tuple[list[dict[str, object]], int]:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    warnings.simplefilter("ignore", LogRecordDroppedAttributesWarning)
    backend = MemoryBackend()
    with _running(backend) as pipeline:
        sdk_logs = InMemoryLogRecordExporter()
        if not direct:
            pipeline.add_log_processor(SimpleLogRecordProcessor(sdk_logs))
        _batches(pipeline)
        assert pipeline.flush()
        if not direct:  # OTLP and any other log reader get one OTel log record a line
            assert sum(1 for r in sdk_logs.get_finished_logs() if not r.log_record.event_name) == 4
        segments = [data for name, data in sorted(backend.objects.items()) if name.endswith(".jsonl")]
        packed = sum(
            1 for data in segments for r in segment.decode(data, columns_kept=True)[0] if r["k"] == "l*"
        )
        records = [r for data in segments for r in segment.decode(data)[0]]
    return [r for r in records if r["k"] == StoreKind.LOG or r.get("n") == "between"], packed


@pytest.mark.parametrize("limits", list(LIMITS))
def test_batched_console_lines_are_stored_as_the_sdk_path_stores_them(
    limits: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct, packed = _stored_batches(True, monkeypatch, LIMITS[limits])
    through_sdk, _ = _stored_batches(False, monkeypatch, LIMITS[limits])
    # every line, in order, with its time and attributes (the event's time is the run's own)
    assert [r if r["k"] == StoreKind.LOG else r["n"] for r in direct] == [
        r if r["k"] == StoreKind.LOG else r["n"] for r in through_sdk
    ]
    assert [r.get("msg", r.get("n")) for r in direct] == [
        "a",
        "b \ufffd",
        "ValueError: bad",
        "between",
        "{'loss': 0.5}",
    ]
    assert direct[2]["a"].get(Attr.EXCEPTION_STACKTRACE, "").startswith("Traceback") or limits != "defaults"
    # one store record a batch, unless a limit could cut a line's attributes (then one a line: the
    # count limit of 2 cuts the first batch's, with a traceback, not the second's)
    assert packed == {"defaults": 2, "log record count": 1}.get(limits, 0)


def test_batched_lines_read_back_one_log_entry_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = MemoryBackend()
    with _running(backend) as pipeline:
        _batches(pipeline)
        assert pipeline.flush()
        run = read_store(backend)
    assert [(r["message"], r["level"], r["time"]) for r in run.logs] == [
        ("a", "INFO", 1.5),
        ("b \ufffd", "WARNING", 1.6),
        ("ValueError: bad", "ERROR", 1.7),
        ("{'loss': 0.5}", "INFO", 2.5),
    ]
    assert run.logs[2]["traceback"].endswith("ValueError: bad") and run.logs[0]["traceback"] is None
    assert run.logs[1]["attributes"] == {Attr.RANK: "0", Attr.LOG_STREAM: "stdout"}
