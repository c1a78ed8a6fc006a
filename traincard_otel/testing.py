"""Test helpers for code that reports with traincard: an in-memory capture and a fake datastore.

Example (pytest)::

    from traincard_otel.testing import capture

    def test_my_training_loop_reports_loss():
        with capture() as cap:
            train(reporter=cap.reporter, steps=3)  # your code, reporting as it does in production
            cap.drain()
            assert cap.events()  # the OTel log events so far (their names: docs/schema.md)
            run = cap.load()  # what the card would show
            assert run.metrics["loss"].steps == [1, 2, 3]

Inside ``capture()``, ``traincard_otel.instrument(...)``, ``Reporter()`` and ``configure()`` all
report into the capture. Nothing is written to disk and no thread drains behind the test's back:
:meth:`Capture.drain` translates what was reported so far, :meth:`Capture.flush` also writes it to
the in-memory store.
"""

from __future__ import annotations

import builtins
import contextlib
import fnmatch
import threading
from collections.abc import Iterable, Iterator

from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ._identity import MetaflowIdentity
from ._read.load.reader import read_store
from ._read.run import LoadedRun
from ._schema import StatusSection
from ._types import Reported
from ._write import pipeline as _pipeline
from ._write.report.reporter import Reporter
from .exceptions import ConfigError

__all__ = ["Capture", "MemoryBackend", "capture"]


class MemoryBackend:
    """A datastore held in memory: whole objects replaced, never appended, like an object store."""

    def __init__(self, name: str = "test") -> None:
        self.objects: dict[str, bytes] = {}
        self.name = name
        self._lock = threading.Lock()

    @property
    def spec(self) -> str:
        return f"memory://{self.name}"

    def write(self, name: str, data: bytes) -> None:
        with self._lock:
            self.objects[name] = bytes(data)

    def list(self) -> list[str]:
        with self._lock:
            return sorted(self.objects)

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        with self._lock:
            return {n: self.objects[n] for n in names if n in self.objects}

    def delete(self, names: Iterable[str]) -> None:
        with self._lock:
            for n in names:
                self.objects.pop(n, None)

    def files(self, pattern: str = "*") -> builtins.list[str]:
        """Object names matching a glob pattern (``"*/state.json"``)."""
        return [n for n in self.list() if fnmatch.fnmatch(n, pattern)]


class Capture:
    """What one process reported: OTel spans and log records, and the store they produced."""

    def __init__(self, pipeline: _pipeline.Pipeline, store: MemoryBackend) -> None:
        self.pipeline = pipeline  # internal; for tests of the package itself
        self.store = store
        self.reporter = Reporter._bound(pipeline)
        self._spans = InMemorySpanExporter()
        self._logs = InMemoryLogRecordExporter()
        pipeline.providers.tracer_provider.add_span_processor(SimpleSpanProcessor(self._spans))
        pipeline.add_log_processor(SimpleLogRecordProcessor(self._logs))

    def drain(self) -> None:
        """Translate everything reported so far into OTel signals (and the store's buffer)."""
        self.pipeline.converter.drain()

    def flush(self) -> bool:
        """Drain, then write to the in-memory store."""
        return self.pipeline.flush()

    @property
    def spans(self) -> list[ReadableSpan]:
        """Finished spans (``training.run`` ends at close)."""
        return list(self._spans.get_finished_spans())

    @property
    def logs(self) -> list[ReadableLogRecord]:
        """Every log record emitted so far, events included."""
        return list(self._logs.get_finished_logs())

    def events(self, name: str | None = None) -> list[LogRecord]:
        """Log records that are events (``name`` given: only that event), as OTel SDK log records."""
        out = [r.log_record for r in self.logs if r.log_record.event_name]
        return [r for r in out if name is None or r.event_name == name]

    def lines(self) -> list[str]:
        """The text log lines (records without an event name)."""
        return [str(r.log_record.body) for r in self.logs if not r.log_record.event_name]

    def status(self) -> StatusSection:
        """The status panel as the card would show it now."""
        return self.pipeline.state()

    def load(self) -> LoadedRun:
        """Flush, then read the in-memory store as :func:`traincard_otel.load` reads a real one."""
        self.flush()
        return LoadedRun.of(read_store(self.store))

    def close(self) -> None:
        self.pipeline.shutdown()


@contextlib.contextmanager
def capture(
    *,
    store: MemoryBackend | None = None,
    metaflow_identity: MetaflowIdentity | None = None,
    **settings: Reported,
) -> Iterator[Capture]:
    """Run a pipeline that reports into memory for the ``with`` block, then shut it down.

    ``settings`` are :func:`traincard_otel.configure`'s; by default system sampling is off and
    nothing drains on a timer (call :meth:`Capture.drain` / :meth:`Capture.flush`).

    Raises:
        ConfigError: telemetry is already running in this process.
    """
    if _pipeline.active() is not None:
        raise ConfigError(
            "traincard is already running in this process; call traincard_otel.shutdown() first"
        )
    settings.setdefault("system", False)
    settings.setdefault("flush_interval_s", 3600.0)
    if "capture_console" in _known_settings():  # the test runner's own output stays its own
        settings.setdefault("capture_console", False)
    backend = store or MemoryBackend()
    pipeline = _pipeline.start(backend=backend, metaflow_identity=metaflow_identity, **settings)
    if pipeline is None:
        raise ConfigError("telemetry is disabled (OTEL_SDK_DISABLED); unset it to capture")
    cap = Capture(pipeline, backend)
    try:
        yield cap
    finally:
        cap.close()


def _known_settings() -> set[str]:
    import dataclasses

    from ._config import Settings

    return {f.name for f in dataclasses.fields(Settings)}
