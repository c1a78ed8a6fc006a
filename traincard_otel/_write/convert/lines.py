"""Log lines straight into the store when the store is the only reader of the run's log records.

A line printed every step (a Trainer's printer, a loop's ``print``) costs the converter about
10 µs through the OTel SDK, most of it in building and checking the SDK's record, on a thread
that holds the GIL the training thread needs; written here, about 2.5 µs. With no log exporter
configured those records reach only the store, so the converter writes the store's records
itself: the lines console capture read in one go as one packed record, not a record a line. It
applies the SDK's attribute limits (``OTEL_ATTRIBUTE_COUNT_LIMIT``,
``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` and their ``OTEL_LOGRECORD_*`` forms) with the SDK's own
code wherever they could change a line, so the store holds what the SDK's path would have
stored, record for record.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk._logs import LogRecordDroppedAttributesWarning, LogRecordLimits

from ..._schema import Attr, LogLine, LogLines
from ..._store.segment import Record, line_run
from ..._text import encodable
from ..export.store import log_line_record
from ..store.writer import StoreWriter
from .values import safe_value

_PLAIN = (str, bool, int, float)


def line_attributes(item: LogLine) -> dict[str, object]:
    """A line's attributes as the converter emits them, its traceback among them."""
    attrs: dict[str, object] = safe_value(dict(item.attributes or {}))
    if item.traceback:
        attrs[Attr.EXCEPTION_STACKTRACE] = encodable(str(item.traceback))
    return attrs


def each_line(batch: LogLines) -> Iterator[LogLine]:
    """The lines of a batch, one :class:`LogLine` each (what the SDK's path emits: one OTel log
    record a line, as collectors expect)."""
    tracebacks = batch.tracebacks
    for i, (t, level, text) in enumerate(zip(batch.times, batch.levels, batch.lines, strict=True)):
        yield LogLine(t, level, text, tracebacks.get(i), batch.attributes)


def line_time(t: float) -> float:
    """The time the store keeps for ``t``: the SDK's nanoseconds, read back as seconds."""
    return int(t * 1e9) / 1e9


class StoreLines:
    """Writes log lines into the store as the SDK and the store's log processor would: each line
    its record, except the lines console capture read in one go (:class:`LogLines`), which are one
    packed record (:func:`~traincard_otel._store.segment.line_run`) wherever the SDK's limits could
    not change them."""

    def __init__(self, writer: StoreWriter) -> None:
        self._writer = writer
        limits = LogRecordLimits()  # from the environment, as the pipeline's LoggerProvider reads it
        self._max_count = limits.max_log_record_attributes
        self._max_length = limits.max_log_record_attribute_length

    def write(self, lines: Iterable[LogLine | LogLines]) -> None:
        records: list[Record] = []
        for item in lines:
            if type(item) is LogLines:
                records += self._batch(item)
            else:
                records.append(self._record(item))  # type: ignore[arg-type]
        self._writer.add_many(records)

    def _record(self, item: LogLine) -> Record:
        return log_line_record(line_time(item.t), item.level, encodable(item.line), self._limited(item))

    def _batch(self, item: LogLines) -> list[Record]:
        attrs = safe_value(dict(item.attributes or {}))
        plain = self._max_length is None and all(type(v) in _PLAIN and k for k, v in attrs.items())
        if not plain or (
            self._max_count is not None and len(attrs) + bool(item.tracebacks) > self._max_count
        ):
            return [self._record(line) for line in each_line(item)]  # the limits' cuts, line by line
        tracebacks = {i: encodable(text) for i, text in item.tracebacks.items()}
        texts = [text if text.isascii() else encodable(text) for text in item.lines]
        return [line_run(map(line_time, item.times), list(item.levels), texts, attrs, tracebacks)]

    def _limited(self, item: LogLine) -> Mapping[str, object]:
        attrs = line_attributes(item)
        if (
            self._max_length is None
            and (self._max_count is None or len(attrs) <= self._max_count)
            and all(type(v) in _PLAIN and k for k, v in attrs.items())
        ):
            return attrs  # nothing the SDK would cut, drop or convert
        bounded = BoundedAttributes(
            maxlen=self._max_count,
            attributes=attrs,  # type: ignore[arg-type]
            immutable=False,
            max_value_len=self._max_length,
            extended_attributes=True,
        )
        if bounded.dropped:
            warnings.warn(
                "Log record attributes were dropped due to limits",
                LogRecordDroppedAttributesWarning,
                stacklevel=2,
            )
        return bounded
