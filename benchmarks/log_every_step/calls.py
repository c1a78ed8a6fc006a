"""What the training thread does, counted: the plain run and each instrumented variant, one process
each, with the training thread's calls, garbage collections and system calls counted over the timed
steps (from ``--skip``). Counts do not move with the machine's load, so they tell work added to the
training thread (a call, a collection, a write) from the same work running slower, which only
clocks show:

* Python function calls and C calls by function (``sys.setprofile``, on the training thread only);
* garbage collections started on the training thread, and their CPU (``gc.callbacks``, thread
  CPU clock: the one figure here that is a time);
* system calls by name (``strace -c`` attached to the training thread alone, where strace is
  installed and may attach; else none are counted).

The child side (:class:`Counting`) runs in the harness's child when :data:`CALLS` is set.
"""

from __future__ import annotations

import collections
import gc
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .harness import CALLS, REPO, VARIANTS, child_command

# The functions whose counts differ most between a variant and the plain run, in the raw figures.
TOP = 25


class Counting:
    """The training thread's calls, collections and system calls between :meth:`start` and :meth:`stop`."""

    def __init__(self, folder: str) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.gc_runs = 0
        self.gc_s = 0.0
        self._gc_started: float | None = None
        self._thread = threading.get_ident()
        self._strace_out = f"{folder}/strace.txt"
        self._strace: subprocess.Popen[bytes] | None = None

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            where = code.co_filename.rsplit("site-packages/", 1)[-1].removeprefix(f"{REPO}/")
            self.calls[f"{where}:{code.co_name}"] += 1
        elif event == "c_call":
            self.calls[f"C:{getattr(arg, '__qualname__', arg)}"] += 1

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._gc_started = time.thread_time()
        elif self._gc_started is not None:
            self.gc_runs += 1
            self.gc_s += time.thread_time() - self._gc_started
            self._gc_started = None

    def start(self) -> None:
        strace = shutil.which("strace")
        if strace:  # the training thread alone: its thread id is the process id
            cmd = [strace, "-c", "-p", str(threading.get_native_id()), "-o", self._strace_out]
            self._strace = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached before the first counted step
        gc.callbacks.append(self._collected)
        sys.setprofile(self._profile)

    def stop(self) -> None:
        sys.setprofile(None)
        gc.callbacks.remove(self._collected)
        if self._strace is not None and self._strace.poll() is not None:
            self._strace = None  # it could not attach (ptrace not allowed): no counts, not zeros
        elif self._strace is not None:
            self._strace.send_signal(signal.SIGINT)  # detaches and writes its table
            self._strace.wait(timeout=30)

    def figures(self, steps: int) -> dict[str, Any]:
        """Per timed step; ``syscalls`` None where strace did not count."""
        return {
            "calls": {name: n / steps for name, n in self.calls.items()},
            "gc_runs": self.gc_runs / steps,
            "gc_s": self.gc_s / steps,
            "syscalls": strace_counts(Path(self._strace_out), steps) if self._strace else None,
        }


def strace_counts(path: Path, steps: int) -> dict[str, float] | None:
    """System calls by name per step from ``strace -c``'s table (None if it wrote none)."""
    if not path.exists():
        return None
    counts: dict[str, float] = {}
    for line in path.read_text().splitlines():
        cells = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(cells) >= 5 and cells[3].isdigit() and cells[-1] != "total":
            counts[cells[-1]] = int(cells[3]) / steps
    return counts


def calls(
    steps: int, skip: int, variants: Sequence[str], env: dict[str, str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The plain run and each variant once (counts need no repeats), and each against the plain."""
    cases = {"plain": (False, {}), **{name: (True, VARIANTS[name]) for name in variants}}
    runs: dict[str, dict[str, Any]] = {}
    for name, (tracked, settings) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            cmd, full = child_command(tracked, steps, skip, tmp, {**env, **settings, CALLS: tmp})
            with open(f"{tmp}/stdout.log", "wb") as log:
                done = subprocess.run(
                    cmd, cwd=REPO, env=full, stdout=log, stderr=subprocess.PIPE, timeout=1800
                )
            if done.returncode != 0:
                raise RuntimeError(done.stderr.decode(errors="replace")[-2000:])
            runs[name] = json.loads(Path(f"{tmp}/result.json").read_text())["counted"]
        print(f"{name}: counted", flush=True)
    plain = runs["plain"]
    rows, differences = [], {}
    for name, got in runs.items():
        row: dict[str, Any] = {
            "case": name,
            "python_calls": python_calls(got),
            "c_calls": sum(got["calls"].values()) - python_calls(got),
            "python_calls_vs_plain": python_calls(got) - python_calls(plain),
            "gc_runs": got["gc_runs"],
            "gc_us": got["gc_s"] * 1e6,
        }
        if got["syscalls"] is not None:
            row["syscalls"] = sum(got["syscalls"].values())
            row.update({f"{call} calls": n for call, n in sorted(got["syscalls"].items())})
        rows.append(row)
        names = set(got["calls"]) | set(plain["calls"])
        diff = {f: got["calls"].get(f, 0.0) - plain["calls"].get(f, 0.0) for f in names}
        differences[name] = dict(sorted(diff.items(), key=lambda item: -abs(item[1]))[:TOP])
    return rows, {"runs": runs, "differences": differences}


def python_calls(counted: dict[str, Any]) -> float:
    """Python function calls a step (C calls are named ``C:...``)."""
    return float(sum(n for name, n in counted["calls"].items() if not name.startswith("C:")))
