"""Console capture: what the process writes to stdout and stderr, as log records.

File descriptors 1 and 2 are replaced by pipes whose reader thread writes every byte through to
the original descriptors (the terminal and Metaflow's task logs see exactly what they saw before,
at most ``GATHER_S`` later: the thread wakes for a batch of writes, not for each; a process killed
by ``SIGKILL`` takes up to that much of its latest output with it)
and turns the text into log lines: output of ``print``, of C extensions writing to the descriptors
directly, of child processes that inherited them. Where a descriptor cannot be replaced (no real
file descriptor, as under some notebooks), ``sys.stdout``/``sys.stderr`` are wrapped instead.
Where stdout and stderr go to one place (a terminal, ``2>&1``, a batch job's one log file), both
descriptors share one pipe: their order there is what people read (a tqdm bar on stderr redrawn
around lines written to stdout), and two pipes read apart would shuffle it; which of the two a
line came from is then not known.

Lines become records with ``log.iostream`` (stdout, stderr; absent where the two share a pipe) and
this process's rank; the lines of one read of the pipe reach the sink as one batch. Severity: a
Python traceback is one ERROR record carrying the whole block; a line that says it is a warning,
or has Python's warning format (``path.py:12: ...``), is WARNING; a line that says it is an error
(``ERROR:``, ``[error]``, ``RuntimeError: ...``) is ERROR, and so is any other stderr line, except
a progress bar; the rest is INFO. Carriage-return progress bars (tqdm) keep only their latest
state: one record when the bar's line ends, and at most one every ``PROGRESS_EVERY_S`` while it
runs. Text printed while a bar is drawing (a Python warning) follows the bar's state on its line
and ends it: the record keeps it, as the terminal does, at the text's severity. Lines longer than
``MAX_LINE_CHARS`` are cut with a mark; terminal codes (colours, cursor moves) are removed, and
bytes that are not UTF-8 are escaped. Text that a ``logging`` record already brought to the card (a
StreamHandler printing it) is not recorded twice.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from ..._gil import Slices
from ..._safety import internal_error

MAX_LINE_CHARS = 4096
PROGRESS_EVERY_S = 30.0
PARSE_EVERY_S = 0.5
GATHER_S = 0.25
READ_BYTES = 65536
PIPE_BYTES = 1 << 20
_WARNING = re.compile(r"\b(warn(ing)?s?|[A-Za-z]*Warning)\b[:\]]?", re.I)
# Python's warning format, "path.py:12: ...", also where a library prints it without the category
# (Lightning's "lightning/pytorch/...py:433: The 'train_dataloader' does not have many workers ...")
_WARNING_AT = re.compile(r"[\w.-]\.py:\d+: ")
# "ERROR: ...", "[error] ...", "FATAL! ...", "RuntimeError: ..." (not "error rate 0.3" or "{'error': 1}")
_ERROR = re.compile(r"^\W{0,3}(?i:error|fatal|critical)\s*[:\]!]|^[A-Za-z_][\w.]*(?:Error|Exception): ")
_TRACEBACK = "Traceback (most recent call last):"
# ANSI escape sequences: CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), two-byte ones
_TERMINAL_CODES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_TRACEBACK_BYTES = _TRACEBACK.encode()

Line = tuple[str, str, str | None, float]  # level, text, traceback or None, when its end was written
Sink = Callable[[list[Line], str | None], None]  # a batch of lines (one read's) and their stream or None


class LineSplitter:
    """Bytes of one stream in, log lines out (progress bars collapsed, tracebacks grouped).

    ``stream`` is ``"stdout"`` or ``"stderr"``, or None for both through one pipe."""

    def __init__(self, stream: str | None, sink: Sink, seen: Callable[[str], bool]) -> None:
        self.stream, self._sink, self._seen = stream, sink, seen
        self._lines: list[Line] = []  # split since the last delivery
        self._pending = b""
        self._at = 0.0  # when the bytes being parsed were written (wall clock)
        self._traceback: list[str] | None = None
        self._progress_at = time.monotonic()
        self._dropped = 0  # bytes of an over-long line not held (counted in its truncation mark)
        # logger.exception() printed by a StreamHandler: its message line, then the traceback;
        # the logging bridge already sent both, so a traceback right after a seen line is skipped
        self._after_seen = False
        self._traceback_seen = False

    def feed(self, data: bytes, at: float | None = None) -> None:
        """Split ``data``, written at wall-clock time ``at`` (now if not given)."""
        self._at = time.time() if at is None else at
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        slices = Slices()  # a burst of lines is parsed in slices: the training thread gets the GIL
        for raw in lines:
            self._line(raw)
            slices.check()
        if b"\r" in self._pending and time.monotonic() - self._progress_at >= PROGRESS_EVERY_S:
            self._progress_at = time.monotonic()
            states = [s for s in self._pending.split(b"\r") if s.strip()]
            if states:
                self._emit(_text(states[-1]), True)
        if self._pending.count(b"\r") > 2:  # a running bar: only its latest states are held
            last = self._pending.rfind(b"\r")
            self._pending = self._pending[self._pending.rfind(b"\r", 0, last) :]
        if len(self._pending) > 2 * MAX_LINE_CHARS and b"\r" not in self._pending:
            self._dropped += len(self._pending) - 2 * MAX_LINE_CHARS  # hold no more than is shown
            self._pending = self._pending[: 2 * MAX_LINE_CHARS]

    def flush(self) -> None:
        self._at = time.time()
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        self._end_traceback()
        self.deliver()

    def deliver(self) -> None:
        """Hand the lines split so far to the sink, as one batch."""
        if self._lines:
            lines, self._lines = self._lines, []
            self._sink(lines, self.stream)

    def _line(self, raw: bytes) -> None:
        progress = b"\r" in raw.rstrip(b"\r")
        raw = raw.rstrip(b"\r")
        if progress:
            raw = raw.rsplit(b"\r", 1)[-1]
            # Printed while a bar was drawing: the text follows the bar's state, and the newline
            # keeps both on the terminal. A traceback there starts its block.
            start = raw.find(_TRACEBACK_BYTES)
            if start > 0:
                self._emit(_text(raw[:start]), True)
                raw = raw[start:]
        line, dropped = _text(raw), self._dropped
        self._dropped = 0
        if self._traceback is not None:
            self._traceback.append(line)
            if line and not line[0].isspace():  # the exception line ends the block
                self._end_traceback()
            return
        if line.startswith(_TRACEBACK):
            self._traceback, self._traceback_seen = [line], self._after_seen
            return
        if line.strip():
            self._emit(line, progress, dropped)

    def _end_traceback(self) -> None:
        block, self._traceback = self._traceback, None
        if block:
            text = "\n".join(block)
            if not (self._traceback_seen or self._seen(block[-1])):
                self._lines.append(("ERROR", _cut(block[-1]), text, self._at))

    def _emit(self, line: str, progress: bool, dropped: int = 0) -> None:
        if not line.strip():
            return
        self._after_seen = self._seen(line)
        if self._after_seen:
            return
        # (searched: also a warning printed after a bar's state on its line; substring tests first,
        # since a regular expression searched through every line costs about 1 µs)
        says_warning = "warn" in line.lower() and _WARNING.search(line)
        if says_warning or (".py:" in line and _WARNING_AT.search(line)):
            level = "WARNING"
        elif progress:
            level = "INFO"
        elif self.stream == "stderr" or _ERROR.match(line):
            level = "ERROR"
        else:
            level = "INFO"
        self._lines.append((level, _cut(line, dropped), None, self._at))


def _descriptor(stream: TextIO) -> int | None:
    """The file descriptor under ``stream``, or None (none, closed, or no ``select()`` on pipes)."""
    if os.name == "nt":
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None


def _same_file(a: int, b: int) -> bool:
    """Whether descriptors ``a`` and ``b`` write to one file, pipe or terminal."""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has bytes (or its end) within ``timeout_s``."""
    if timeout_s <= 0:
        return False
    return bool(select.select([fd], [], [], timeout_s)[0])


def _text(raw: bytes) -> str:
    if b"\x1b" in raw:  # colours, cursor moves (tqdm's nested bars), window titles: not text
        raw = _TERMINAL_CODES.sub(b"", raw)
    return raw.decode("utf-8", errors="backslashreplace")


def _cut(line: str, dropped: int = 0) -> str:
    if len(line) <= MAX_LINE_CHARS and not dropped:
        return line
    return f"{line[:MAX_LINE_CHARS]} … [truncated {len(line) - MAX_LINE_CHARS + dropped} chars]"


class _FdTee:
    """File descriptors replaced by one pipe; a thread copies through and splits lines.

    Several descriptors share the pipe only where they write to one place (see the module
    docstring): what comes through is copied to the first one's original."""

    def __init__(self, fds: tuple[int, ...], splitter: LineSplitter) -> None:
        self.fds, self.splitter, self._stopping = fds, splitter, False
        self.originals = [os.dup(fd) for fd in fds]
        self.original = self.originals[0]
        read, write = os.pipe()
        self._read = read
        with contextlib.suppress(ImportError, AttributeError, OSError):  # Linux only; a limit
            import fcntl

            # room for what a loud writer prints while the reader gathers (GATHER_S)
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        for fd in fds:
            os.dup2(write, fd)
        os.close(write)
        self._thread = threading.Thread(
            target=self._run, name="traincard-console-" + "-".join(map(str, fds)), daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self._copy_and_parse()
        finally:
            if not self._stopping:  # this thread ended early: the descriptors must not stay a pipe
                with contextlib.suppress(OSError):  # nobody reads (writes would block when full)
                    self._give_back()

    def _copy_and_parse(self) -> None:
        # Each wake-up of this thread takes the GIL from the training thread (after the read, the
        # write and the wait), and on a busy machine the training thread then waits for a core to
        # be handed it back. So this thread wakes for a batch of writes: after copying what came,
        # it sleeps GATHER_S while the next writes gather in the pipe (an unbuffered print is two
        # writes, as Metaflow runs a task). A lone write goes through at once; what follows it
        # within GATHER_S waits at most that long. Lines are parsed a batch at a time (every
        # PARSE_EVERY_S, each read's bytes with the time they came): in a batch the parser stays
        # in the core's caches, where a line parsed alone costs several times as much. Held bytes
        # are parsed at the latest PARSE_EVERY_S after they came, also when nothing follows them
        # (a loop printing "epoch 1" and then training quietly for an hour), and not in the
        # wake-up that read them (unless the pipe was full): a library's logging handler prints
        # before the logging bridge's handler notes the record, which the printed copy must find.
        self._broken, parsed_at = False, time.monotonic()
        held: list[tuple[float, bytes]] = []
        while True:
            if held and not _readable(self._read, parsed_at + PARSE_EVERY_S - time.monotonic()):
                self._parse(held)
                held, parsed_at = [], time.monotonic()
                continue
            try:
                data = os.read(self._read, READ_BYTES)
            except OSError:
                break
            if not data:
                break
            with contextlib.suppress(OSError):  # the terminal / task log first, always
                os.write(self.original, data)
            held.append((time.time(), data))
            if len(data) < READ_BYTES and not self._stopping:  # (a full read: more is waiting)
                time.sleep(GATHER_S)
            if time.monotonic() - parsed_at >= PARSE_EVERY_S:
                self._parse(held)
                held, parsed_at = [], time.monotonic()
        self._parse(held)

    def _parse(self, held: list[tuple[float, bytes]]) -> None:
        if self._broken:
            return
        try:
            for at, data in held:
                self.splitter.feed(data, at)
            self.splitter.deliver()
        except Exception as exc:  # the output itself must go on flowing
            self._broken = True
            internal_error("console capture", exc)

    def leave_to_parent(self) -> None:
        # A forked child writes on into the pipe (its fd is a copy of the parent's write end),
        # and the parent's reader records it; the child's copies of the reader's ends go.
        for fd in (self._read, *self.originals):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _give_back(self) -> None:
        for fd, original in zip(self.fds, self.originals, strict=True):
            os.dup2(original, fd)

    def stop(self, timeout_s: float) -> None:
        self._stopping = True
        self._give_back()  # our pipe's write end closes: the reader sees the end
        self._thread.join(timeout_s)  # (later than that if a child process still holds it)
        if self._thread.is_alive():
            # A child process still holds the pipe: the reader goes on copying its output to the
            # original descriptor, which therefore stays open (closing it could hand its number
            # to a file opened later, and the child's output would land there).
            return
        for fd in (*self.originals, self._read):
            os.close(fd)
        self.splitter.flush()


class _StreamTee:
    """Where there is no file descriptor to replace: ``sys.stdout``/``sys.stderr`` wrapped."""

    def __init__(self, name: str, splitter: LineSplitter) -> None:
        self.name, self.splitter = name, splitter
        self.original: TextIO = getattr(sys, name)
        self._lock = threading.Lock()  # threads that print at once must not interleave in the splitter
        setattr(sys, name, self)

    def write(self, text: str) -> int:
        n = self.original.write(text)
        try:
            with self._lock:
                self.splitter.feed(text.encode("utf-8", errors="backslashreplace"))
                self.splitter.deliver()
        except Exception as exc:
            internal_error("console capture", exc)
        return n

    def __getattr__(self, name: str) -> object:
        return getattr(self.original, name)

    def leave_to_parent(self) -> None:
        # The parent's splitter is no use in a forked child: its lines would reach no queue.
        if getattr(sys, self.name) is self:
            setattr(sys, self.name, self.original)

    def stop(self, timeout_s: float) -> None:
        if getattr(sys, self.name) is self:
            setattr(sys, self.name, self.original)
        self.splitter.flush()


class ConsoleCapture:
    """stdout and stderr of this process as log records (see the module docstring)."""

    def __init__(self, sink: Sink, seen: Callable[[str], bool] = lambda _line: False) -> None:
        self._sink, self._seen = sink, seen
        self._tees: list[_FdTee | _StreamTee] = []
        self.mode = "off"

    def start(self) -> ConsoleCapture:
        descriptors: list[tuple[int, str]] = []
        for fd, name in ((1, "stdout"), (2, "stderr")):
            stream = getattr(sys, name, None)
            if stream is None:
                continue
            with contextlib.suppress(Exception):  # what was written before goes out unrecorded, in order
                stream.flush()
            if _descriptor(stream) == fd:
                descriptors.append((fd, name))
            else:
                self._wrap(name)
        if len(descriptors) == 2 and _same_file(1, 2):
            try:
                self._tees.append(_FdTee((1, 2), LineSplitter(None, self._sink, self._seen)))
                self.mode = "fd"
                return self
            except OSError:
                pass  # (as below, one stream at a time)
        for fd, name in descriptors:
            try:
                self._tees.append(_FdTee((fd,), LineSplitter(name, self._sink, self._seen)))
                self.mode = "fd"
            except OSError:
                self._wrap(name)
        return self

    def _wrap(self, name: str) -> None:
        self._tees.append(_StreamTee(name, LineSplitter(name, self._sink, self._seen)))
        self.mode = "stream" if self.mode == "off" else self.mode

    def leave_to_parent(self) -> None:
        """In a forked child: what it prints still reaches the parent's capture where descriptors
        are captured (they are inherited); nothing here records it a second time."""
        for tee in self._tees:
            tee.leave_to_parent()
        self._tees = []

    def stop(self, timeout_s: float = 0.5) -> None:
        for name in ("stdout", "stderr"):
            with contextlib.suppress(Exception):  # a closed or replaced stream: nothing to write
                getattr(sys, name).flush()
        for tee in reversed(self._tees):
            try:
                tee.stop(timeout_s)
            except Exception as exc:
                internal_error("console capture", exc)
        self._tees = []
