"""Console capture's line splitting, and its descriptor tee on a pipe of the test's own (fds 1
and 2 of a real process: tests/integration/test_console_capture.py)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from traincard_otel._write.telemetry import console
from traincard_otel._write.telemetry.console import LineSplitter, _FdTee

Record = tuple[str, str, "str | None", "str | None"]


def _sink(got: list[Record]) -> console.Sink:
    """A sink keeping each line of each batch as (level, text, traceback, stream)."""
    return lambda lines, stream: got.extend((lvl, text, tb, stream) for lvl, text, tb, _at in lines)


class _Delivering(LineSplitter):
    """A splitter that hands on what each feed split (as a tee does after each read)."""

    def feed(self, data: bytes, at: float | None = None) -> None:
        super().feed(data, at)
        self.deliver()


def _splitter(stream: str | None = "stdout", seen: tuple[str, ...] = ()) -> tuple[LineSplitter, list[Record]]:
    got: list[Record] = []
    splitter = _Delivering(stream, _sink(got), lambda line: any(m in line for m in seen))
    return splitter, got


def test_the_lines_of_one_read_reach_the_sink_as_one_batch() -> None:
    batches: list[tuple[list[console.Line], str | None]] = []
    splitter = LineSplitter("stdout", lambda lines, stream: batches.append((lines, stream)), lambda _: False)
    splitter.feed(b"one\ntwo\nthr", 1.0)
    splitter.feed(b"ee\nfour\n", 2.0)
    assert batches == []  # split, held until delivered
    splitter.deliver()
    splitter.deliver()  # nothing new: no empty batch
    assert batches == [
        (
            [
                ("INFO", "one", None, 1.0),
                ("INFO", "two", None, 1.0),
                ("INFO", "three", None, 2.0),
                ("INFO", "four", None, 2.0),
            ],
            "stdout",
        )
    ]


def test_severity_by_stream_and_text() -> None:
    out, got = _splitter("stdout")
    out.feed(b"step 1 loss 0.5\nUserWarning: careful\n")
    err, got_err = _splitter("stderr")
    err.feed(
        b"segfault nearby\nwarnings.warn is here\n"
        b"/venv/lightning/pytorch/trainer/connectors/data_connector.py:433: The 'train_dataloader' "
        b"does not have many workers\n"  # Python's warning format, as Lightning prints it
    )
    assert [(r[0], r[1], r[3]) for r in got] == [
        ("INFO", "step 1 loss 0.5", "stdout"),
        ("WARNING", "UserWarning: careful", "stdout"),
    ]
    assert [r[0] for r in got_err] == ["ERROR", "WARNING", "WARNING"]


def test_a_line_that_says_it_is_an_error_is_an_error_on_either_stream_or_both() -> None:
    lines = (
        b"ERROR: the shard is missing\n"
        b"[error] bad batch\n"
        b"torch.OutOfMemoryError: CUDA out of memory\n"
        b"error rate 0.3\n"
        b"{'error': 1.0, 'loss': 2.0}\n"
        b"eval_error: 0.25\n"
        b"an ordinary line\n"
    )
    for stream in ("stdout", None):
        splitter, got = _splitter(stream)
        splitter.feed(lines)
        assert [r[0] for r in got] == ["ERROR", "ERROR", "ERROR", "INFO", "INFO", "INFO", "INFO"]
        assert {r[3] for r in got} == {stream}


def test_terminal_codes_are_not_text() -> None:
    splitter, got = _splitter("stdout")
    splitter.feed(
        b"\x1b[31mERROR: in red\x1b[0m\n"  # a colour, and a colour reset
        b"\x1b[A\n"  # a cursor move alone (tqdm's nested bars): no line
        b"\x1b]0;a window title\x07\x1b[1;32mTraceback (most recent call last):\x1b[0m\n"
        b'  File "x.py", line 1, in <module>\n'
        b"\x1b[1;35mValueError\x1b[0m: bad\n"
        b"\r 8/8 [00:00]\x1b[A\n          \x1b[A\n\x1b[A{'eval_loss': 4.7}\n"  # HF's eval bar, as printed
    )
    assert [(r[0], r[1]) for r in got] == [
        ("ERROR", "ERROR: in red"),
        ("ERROR", "ValueError: bad"),
        ("INFO", " 8/8 [00:00]"),
        ("INFO", "{'eval_loss': 4.7}"),
    ]
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad'
    assert got[1][2] == traceback


def test_a_line_split_across_writes_is_one_record_and_the_tail_comes_at_flush() -> None:
    splitter, got = _splitter()
    splitter.feed(b"hel")
    splitter.feed(b"lo\nno newline")
    assert [r[1] for r in got] == ["hello"]
    splitter.flush()
    assert [r[1] for r in got] == ["hello", "no newline"]


def test_progress_bar_keeps_its_latest_state_only() -> None:
    splitter, got = _splitter("stderr")
    for i in range(1000):
        splitter.feed(f"\r{i:4d}/999 [##  ]".encode())
    assert got == []  # a running bar: nothing until it ends (or PROGRESS_EVERY_S)
    assert len(splitter._pending) < 100  # and only its latest states are held
    splitter.feed(b"\n")
    assert got == [("INFO", " 999/999 [##  ]", None, "stderr")]


def test_a_warning_printed_while_a_bar_draws_is_kept_with_its_severity() -> None:
    splitter, got = _splitter("stderr")
    for i in range(5):
        splitter.feed(f"\r{i}/9 [##  ]".encode())
    splitter.feed(b"x.py:7: UserWarning: careful\n  warnings.warn('careful')\n")
    splitter.feed(b"\r5/9 [### ]\r9/9 [####]\n")
    assert got == [
        ("WARNING", "4/9 [##  ]x.py:7: UserWarning: careful", None, "stderr"),  # as the terminal shows it
        ("WARNING", "  warnings.warn('careful')", None, "stderr"),
        ("INFO", "9/9 [####]", None, "stderr"),
    ]


def test_a_traceback_printed_while_a_bar_draws_is_one_block_after_the_bars_state() -> None:
    splitter, got = _splitter("stderr")
    splitter.feed(b"\r1/9 [#   ]\r2/9 [#   ]Traceback (most recent call last):\n")
    splitter.feed(b'  File "x.py", line 1, in <module>\nValueError: bad\n')
    assert [(r[0], r[1]) for r in got] == [("INFO", "2/9 [#   ]"), ("ERROR", "ValueError: bad")]
    assert got[1][2] is not None and got[1][2].startswith("Traceback (most recent call last):")


def test_a_running_bar_reports_every_progress_interval(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    now = [100.0]
    monkeypatch.setattr(console, "time", SimpleNamespace(monotonic=lambda: now[0], time=lambda: now[0]))
    splitter, got = _splitter("stderr")
    splitter.feed(b"\r 1/9")
    now[0] += console.PROGRESS_EVERY_S
    splitter.feed(b"\r 5/9")
    assert [r[1] for r in got] == [" 5/9"]


def test_long_line_cut_with_a_mark_and_bad_bytes_escaped() -> None:
    splitter, got = _splitter()
    for _ in range(100):
        splitter.feed(b"y" * 1000)
    splitter.feed(b"\n\xff\xfeok\n")
    long, bad = got[0][1], got[1][1]
    assert long == "y" * console.MAX_LINE_CHARS + f" … [truncated {100_000 - console.MAX_LINE_CHARS} chars]"
    assert bad == "\\xff\\xfeok"


def test_traceback_is_one_error_record_with_the_block() -> None:
    splitter, got = _splitter("stderr")
    splitter.feed(
        b"Traceback (most recent call last):\n"
        b'  File "x.py", line 1, in <module>\n'
        b"    1 / 0\n"
        b"ZeroDivisionError: division by zero\n"
        b"after\n"
    )
    (level, line, tb, stream), after = got
    assert (level, line, stream) == ("ERROR", "ZeroDivisionError: division by zero", "stderr")
    assert tb is not None and tb.startswith("Traceback") and tb.endswith("division by zero")
    assert after[1] == "after"


def test_printed_copy_of_a_logged_record_and_its_traceback_are_skipped() -> None:
    splitter, got = _splitter("stderr", seen=("training failed badly",))
    splitter.feed(
        b"training failed badly\n"
        b"Traceback (most recent call last):\n"
        b'  File "x.py", line 1, in <module>\n'
        b"KeyError: 'k'\n"
        b"a line of its own\n"
    )
    assert [r[1] for r in got] == ["a line of its own"]


def test_fd_tee_copies_every_byte_and_parses_a_line_that_nothing_follows() -> None:
    read, write = os.pipe()
    splitter, got = _splitter()
    tee = _FdTee((write,), splitter)
    try:
        os.write(write, b"epoch 1\n")
        os.write(write, b"then quiet \xff\n")  # within PARSE_EVERY_S of the first, then silence
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [r[1] for r in got] == ["epoch 1", "then quiet \\xff"]
    finally:
        tee.stop(2.0)
    os.write(write, b"after stop\n")  # the descriptor is the original again
    os.close(write)
    passed = b""
    while chunk := os.read(read, 65536):
        passed += chunk
    os.close(read)
    assert passed == b"epoch 1\nthen quiet \xff\nafter stop\n"
    assert len(got) == 2


def test_fd_tee_lines_parsed_in_one_batch_keep_the_times_they_were_written(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(console, "PARSE_EVERY_S", 1.5)  # both writes come within one batch
    read, write = os.pipe()
    got: list[tuple[str, float]] = []
    splitter = LineSplitter(
        "stdout",
        lambda lines, _stream: got.extend((line, at) for _lvl, line, _tb, at in lines),
        lambda _: False,
    )
    tee = _FdTee((write,), splitter)
    try:
        first = time.time()
        os.write(write, b"first\n")
        time.sleep(0.6)
        second = time.time()
        os.write(write, b"second\n")
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        parsed = time.time()
    finally:
        tee.stop(2.0)
        os.close(write)
        os.close(read)
    assert [line for line, _ in got] == ["first", "second"]
    (_, first_at), (_, second_at) = got
    assert first <= first_at < first + 0.3 and second <= second_at < second + 0.3
    assert parsed - first_at > 0.8  # (the batch was parsed well after the first line came)


class _ReadFails:
    """``os`` as the tee sees it, except that reading the pipe fails."""

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    @staticmethod
    def read(fd: int, n: int) -> bytes:
        raise OSError("reading the pipe failed")


def test_a_reader_that_fails_gives_the_descriptor_back(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    read, write = os.pipe()
    monkeypatch.setattr(console, "os", _ReadFails())
    tee = _FdTee((write,), _splitter()[0])
    tee._thread.join(5)
    assert not tee._thread.is_alive()
    monkeypatch.undo()
    # the original pipe again: a write that would fill (and block on) an unread pipe goes through
    os.write(write, b"still reaches the original\n")
    tee.stop(1.0)
    os.close(write)
    os.set_blocking(read, False)  # (nothing there must fail the test, not hang it)
    try:
        got = os.read(read, 65536)
    except BlockingIOError:
        got = b""
    os.close(read)
    assert got == b"still reaches the original\n"


def test_stream_wrapping_tees_text_and_puts_the_stream_back(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import io
    import sys

    original = io.StringIO()
    monkeypatch.setattr(sys, "stdout", original)
    splitter, got = _splitter()
    tee = console._StreamTee("stdout", splitter)
    print("through the wrapper", "\udcff")  # a lone surrogate (bytes a decoder escaped) is kept
    wrapped = sys.stdout
    tee.stop(1.0)
    assert wrapped is tee and sys.stdout is original
    assert original.getvalue() == "through the wrapper \udcff\n"
    assert [r[1] for r in got] == ["through the wrapper \\udcff"]


class _CountedReads:
    """``os`` as the tee sees it, with the sizes of its reads of the pipe recorded."""

    def __init__(self) -> None:
        self.reads: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def read(self, fd: int, n: int) -> bytes:
        data = os.read(fd, n)
        self.reads.append(len(data))
        return data


def test_fd_tee_copies_a_lone_write_at_once_and_gathers_the_writes_that_follow(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    read, write = os.pipe()
    counted = _CountedReads()
    monkeypatch.setattr(console, "os", counted)
    monkeypatch.setattr(console, "GATHER_S", 0.5)  # longer than any scheduling delay of this test
    splitter, got = _splitter()
    tee = _FdTee((write,), splitter)
    try:
        os.write(write, b"step 0\n")
        deadline = time.monotonic() + 0.4  # copied through before the gathering ends: at once
        assert os.read(read, 65536) == b"step 0\n" and time.monotonic() < deadline
        for step in range(1, 20):  # what a loop printing every 10 ms writes meanwhile
            os.write(write, f"step {step}\n".encode())
            time.sleep(0.01)  # (time for a reader that wakes at every write to read each one)
        passed = b""
        while passed.count(b"\n") < 19:
            passed += os.read(read, 65536)
        assert passed == b"".join(f"step {step}\n".encode() for step in range(1, 20))
    finally:
        tee.stop(2.0)
    os.close(write)
    os.close(read)
    assert counted.reads[0] == len(b"step 0\n")  # the lone write: a read of its own
    assert len(counted.reads) <= 5  # the 19 that followed: a read per gathering (+ the end), not 19
    assert [r[1] for r in got] == [f"step {step}" for step in range(20)]


def test_descriptors_that_write_to_one_place_share_a_pipe_and_keep_their_order() -> None:
    read, write = os.pipe()
    other = os.dup(write)  # a second descriptor on the same pipe: stdout and stderr after 2>&1
    splitter, got = _splitter(None)
    tee = _FdTee((write, other), splitter)
    expected = b""
    try:
        for step in range(50):
            for fd, text in ((other, f"\r{step}/50 bar"), (write, f"\rline {step}\n"), (other, "\r")):
                os.write(fd, text.encode())
                expected += text.encode()
        passed = b""
        while len(passed) < len(expected):
            passed += os.read(read, 65536)
        assert passed == expected  # byte for byte, in the order written
    finally:
        tee.stop(2.0)
    os.write(write, b"stdout again\n")  # both descriptors are the original pipe again
    os.write(other, b"stderr again\n")
    assert os.read(read, 65536) == b"stdout again\nstderr again\n"
    for fd in (write, other, read):
        os.close(fd)
    assert [r[1] for r in got] == [f"line {step}" for step in range(50)]
    assert {r[3] for r in got} == {None}  # which of the two wrote a line is not known


def test_a_printed_log_record_noted_just_after_its_print_is_still_skipped() -> None:
    """A library's own handler prints first; the logging bridge's handler notes the record after it."""
    read, write = os.pipe()
    noted: list[str] = []
    got: list[Record] = []
    splitter = LineSplitter("stderr", _sink(got), lambda line: any(m in line for m in noted))
    tee = _FdTee((write,), splitter)
    try:
        time.sleep(console.PARSE_EVERY_S + 0.1)  # (the last parse long ago: the next batch is due)
        os.write(write, b"[library] a warning printed by its handler\n")
        time.sleep(0.02)  # (the training thread waits for the GIL a while)
        noted.append("a warning printed by its handler")
        os.write(write, b"a line of its own\n")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        tee.stop(2.0)
    os.close(write)
    os.close(read)
    assert [r[1] for r in got] == ["a line of its own"]
