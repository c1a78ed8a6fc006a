"""Python ``logging`` records -> the report queue (card log tail and OTel logs).

Attached to the root logger at set-up (level ``TRAINCARD_LOG_LEVEL``, default INFO). The
OpenTelemetry SDK's own loggers are left out: an exporter that fails and logs about it must not
feed its own failure back into the pipeline.
"""

from __future__ import annotations

import logging
import traceback

from ._queue import ReportQueue
from ._schema import LogLine

_EXCLUDED = ("opentelemetry",)
_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


class QueueHandler(logging.Handler):
    """Puts log records into the report queue, tracebacks included."""

    def __init__(self, queue: ReportQueue, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.queue = queue
        self.root_level: int | None = None  # root's level before attach() lowered it

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(_EXCLUDED)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tb = None
            if record.exc_info and record.exc_info[0] is not None:
                tb = "".join(traceback.format_exception(*record.exc_info))
            level = record.levelname if record.levelname in _LEVELS else "INFO"
            message = record.getMessage()
            self.queue.put(LogLine(record.created, level, f"{record.name}: {message}", tb, None))
            self.queue.recent_messages.append(message)
            # Our handler on the root logger stops Python's last-resort stderr handler from
            # running: warnings (ours included) would then reach the card but not the terminal.
            last_resort = logging.lastResort
            if (
                last_resort is not None
                and record.levelno >= last_resort.level
                and not self._others_handle(record)
            ):
                last_resort.handle(record)
        except Exception:  # a logging handler must never raise into the caller
            self.handleError(record)

    def _others_handle(self, record: logging.LogRecord) -> bool:
        """Whether a handler other than this one sees ``record`` (as Python's lookup would)."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return True
            logger = logger.parent if logger.propagate else None
        return False


def attach(queue: ReportQueue, level: str = "INFO") -> QueueHandler:
    handler = QueueHandler(queue, logging.getLevelName(level.upper()))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > handler.level:
        # Root's level gates records before any handler sees them; lower it only as far as we need.
        handler.root_level = root.level
        root.setLevel(handler.level)
    return handler


def detach(handler: QueueHandler) -> None:
    root = logging.getLogger()
    root.removeHandler(handler)
    if handler.root_level is not None and root.level == handler.level:  # unless changed since
        root.setLevel(handler.root_level)
