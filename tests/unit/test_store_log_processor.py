"""The pipeline's store log processor stores what the SDK's simple processor and the store's
exporter store, record for record, without their per-record context."""

from __future__ import annotations

import json

import pytest
from opentelemetry import context as otel_context
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

from traincard_otel._schema import Event
from traincard_otel._store import segment
from traincard_otel._write.export.store import StoreLogProcessor, TraincardLogExporter
from traincard_otel._write.store.writer import StoreWriter
from traincard_otel.testing import MemoryBackend


def _emit_all(provider: LoggerProvider) -> None:
    logger = provider.get_logger("test")
    logger.emit(
        timestamp=1_700_000_000_000_000_000,
        severity_number=SeverityNumber.WARN,
        severity_text="WARNING",
        body="UserWarning: something",
        attributes={"traincard.rank": "0", "log.iostream": "stderr"},
    )
    logger.emit(
        timestamp=1_700_000_001_000_000_000, body={"path": "ckpt/1"}, event_name="traincard.checkpoint"
    )
    runs = {
        "runs": [
            {
                "phase": "train",
                "names": ["loss"],
                "steps": [1, 2],
                "times": [1.0, 2.0],
                "values": [[0.5, 0.4]],
            }
        ]
    }
    logger.emit(timestamp=1_700_000_002_000_000_000, body=runs, event_name=Event.METRICS)
    logger.emit(
        timestamp=1_700_000_003_000_000_000, body={"step": 2, "status": "running"}, event_name=Event.STATUS
    )


def _stored(backend: MemoryBackend) -> tuple[list[dict[str, object]], dict[str, object]]:
    records: list[dict[str, object]] = []
    state: dict[str, object] = {}
    for name, data in sorted(backend.objects.items()):
        if name.endswith("state.json"):
            state = json.loads(data)
        else:
            records += segment.decode(data)[0]
    return records, state


def test_the_store_processor_stores_what_the_simple_processor_and_exporter_store() -> None:
    stored = []
    for make in (StoreLogProcessor, lambda w: SimpleLogRecordProcessor(TraincardLogExporter(w))):
        backend = MemoryBackend()
        writer = StoreWriter(backend, attempt=0, rank=0)
        provider = LoggerProvider(shutdown_on_exit=False)
        provider.add_log_record_processor(make(writer))
        _emit_all(provider)
        assert writer.flush_now()
        stored.append(_stored(backend))
    (lean, lean_state), (simple, simple_state) = stored
    assert lean == simple
    kinds = [r["k"] for r in lean]
    assert len(lean) == 3, kinds  # the line, the event, the packed run; the status is the state file
    assert any(r.get("msg") == "UserWarning: something" and r.get("lvl") == "WARNING" for r in lean)
    assert lean_state.get("step") == simple_state.get("step") == 2


def test_the_store_processor_attaches_no_context(monkeypatch: pytest.MonkeyPatch) -> None:
    attached: list[object] = []
    real_attach = otel_context.attach

    def counting_attach(ctx: otel_context.Context) -> object:
        attached.append(ctx)
        return real_attach(ctx)

    monkeypatch.setattr("opentelemetry.sdk._logs._internal.export.attach", counting_attach)
    writer = StoreWriter(MemoryBackend(), attempt=0, rank=0)
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(StoreLogProcessor(writer))
    _emit_all(provider)
    assert attached == []
    provider.add_log_record_processor(SimpleLogRecordProcessor(TraincardLogExporter(writer)))
    _emit_all(provider)
    assert len(attached) == 4  # the check can see an attach: the simple processor's, one a record
