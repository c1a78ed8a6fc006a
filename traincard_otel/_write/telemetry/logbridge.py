"""Python ``logging`` records -> the report queue (card log tail and OTel logs).

Attached to the root logger at set-up (level ``TRAINCARD_LOG_LEVEL``, default INFO), and to every
library logger that prints through a handler of its own without propagating to the root:
transformers, Lightning and torch log that way. Without it their records would reach the card
only as printed text, where a warning printed to stderr reads as an error; with it they keep their
level, and console capture skips their printed copies. Loggers made later are found at the
pipeline's next turn. A library logger with no handler but a ``NullHandler`` is left alone: what
it logs is meant to go nowhere. The OpenTelemetry SDK's own loggers are left out: an exporter
that fails and logs about it must not feed its own failure back into the pipeline.
"""

from __future__ import annotations

import logging
import traceback

from ..._schema import LogLine
from ..queue import ReportQueue

_EXCLUDED = ("opentelemetry",)
_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}


class QueueHandler(logging.Handler):
    """Puts log records into the report queue, tracebacks included.

    On library loggers (``at_root=False``) it takes only the records that do not also reach the
    root logger, whose handler takes those (a library may turn its propagation on later)."""

    def __init__(self, queue: ReportQueue, level: int = logging.INFO, *, at_root: bool = True) -> None:
        super().__init__(level)
        self.queue = queue
        self.at_root = at_root

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(_EXCLUDED):
            return False
        return self.at_root or not _reaches_root(logging.getLogger(record.name))

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


def _reaches_root(logger: logging.Logger) -> bool:
    """Whether records of ``logger`` propagate up to the root logger."""
    node: logging.Logger | None = logger
    while node is not None and node.parent is not None:
        if not node.propagate:
            return False
        node = node.parent
    return True


def _prints_alone(logger: logging.Logger) -> bool:
    """A logger that does not propagate and has a handler that writes somewhere."""
    return not logger.propagate and any(not isinstance(h, logging.NullHandler) for h in logger.handlers)


class LogBridge:
    """The handlers that bring Python ``logging`` to the queue (see the module docstring)."""

    def __init__(self, queue: ReportQueue, level: str = "INFO") -> None:
        levelno = logging.getLevelName(level.upper())
        self.root_handler = QueueHandler(queue, levelno)
        self.library_handler = QueueHandler(queue, levelno, at_root=False)
        self.root_level: int | None = None  # root's level before attach() lowered it
        self.libraries: dict[str, logging.Logger] = {}  # the library loggers attached to
        self._loggers_seen = -1  # how many loggers there were at the last look

    def attach(self) -> LogBridge:
        root = logging.getLogger()
        root.addHandler(self.root_handler)
        if root.level > self.root_handler.level:
            # Root's level gates records before any handler sees them; lower it only as far as we need.
            self.root_level = root.level
            root.setLevel(self.root_handler.level)
        self.refresh()
        return self

    def refresh(self) -> None:
        """Attach to the library loggers made since the last look (nothing to do when none were)."""
        loggers = logging.root.manager.loggerDict
        if len(loggers) == self._loggers_seen:
            return
        self._loggers_seen = len(loggers)
        for name, logger in list(loggers.items()):  # (a copy: other threads make loggers meanwhile)
            if name not in self.libraries and isinstance(logger, logging.Logger) and _prints_alone(logger):
                logger.addHandler(self.library_handler)
                self.libraries[name] = logger

    def detach(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self.root_handler)
        if self.root_level is not None and root.level == self.root_handler.level:  # unless changed since
            root.setLevel(self.root_level)
        for logger in self.libraries.values():
            logger.removeHandler(self.library_handler)
        self.libraries = {}
