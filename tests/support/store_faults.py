"""The storage fault tests' child processes (``store_child.py``), driven from the test: one that
reports until told to return without ``close()``, one that loads what a store holds, and the check
that an interpreter exit without ``close()`` keeps everything (run on every backend)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.helpers import subprocess_env

CHILD = str(Path(__file__).resolve().parent / "store_child.py")


class Child:
    """``store_child.py report``: its stdout read on a thread, its health lines kept in order."""

    def __init__(self, env: dict[str, str], flag: Path) -> None:
        self.flag = flag
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, "report", str(flag)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.health: list[dict[str, Any]] = []
        self.step = 0
        self.last: int | None = None
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.err.extend(self.proc.stderr)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "health":
                self.health.append(json.loads(rest))
            elif kind == "step":
                self.step = int(rest)
            elif kind == "last":
                self.last = int(rest)

    def wait_for(self, what: str, cond: Callable[[], bool], timeout: float) -> float:
        t0 = time.monotonic()
        while not cond():
            if self.proc.poll() is not None:
                raise AssertionError(f"child exited while waiting for {what}: {''.join(self.err)[-3000:]}")
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"no {what} within {timeout} s; health: {self.health[-3:]}")
            time.sleep(0.05)
        return time.monotonic() - t0

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Let the script return (no close()); its exit code and stderr."""
        self.flag.touch()
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return code, "".join(self.err)


def load_in_child(target: str, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, CHILD, "load", target], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def child_env(**extra: str) -> dict[str, str]:
    return subprocess_env(TRAINCARD_SYSTEM="false", TRAINCARD_FLUSH_INTERVAL="0.3", **extra)


def assert_whole_run(got: dict[str, Any], last: int | None) -> None:
    """Every step from 1 to the last one reported, once each, and the run marked finished."""
    assert last is not None and last >= 100
    steps = got["steps"]
    assert len(steps) == len(set(steps)), "duplicate rows"
    assert steps == list(range(1, last + 1)), (len(steps), steps[-3:], last)
    assert got["status"] == "finished"
    assert got["stats"]["corrupt_segments"] == 0


def exit_without_close(env: dict[str, str], target: str, tmp_path: Path) -> None:
    env = {**env, "TRAINCARD_FLUSH_INTERVAL": "3600"}  # nothing flushed before exit: the exit hook must
    child = Child(env, tmp_path / "done")
    child.wait_for("step 300", lambda: child.step >= 300, 60)
    code, err = child.finish()
    assert code == 0, err[-3000:]
    assert "cannot schedule new futures" not in err and "could not be written" not in err, err[-3000:]
    got = load_in_child(target, env)
    assert_whole_run(got, child.last)
    assert got["states"][0]["store_health"]["write_errors"] == 0
