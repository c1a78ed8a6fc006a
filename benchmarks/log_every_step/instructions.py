"""Counting instead of timing: the plain and the instrumented run, at once, each under valgrind's
callgrind, which counts the instructions each thread executes over the timed steps (from step
``--skip``; the child switches the count on and dumps it there). The count is the same whatever
else the machine does, so it tells work added to the training thread from the interference of
other threads and processes, which only clocks show. Under valgrind a step takes seconds, so the
timer-driven background threads' counts are not per-step figures and are left out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .harness import CALLGRIND, HERE, REPO


def callgrind_threads(folder: Path, stem: str) -> dict[int, int]:
    """Instructions by thread number (1: the main thread) in callgrind's first dump: the files
    ``<stem>.1-<thread>`` that ``--separate-threads=yes`` writes, each with a ``summary:`` line."""
    counts: dict[int, int] = {}
    for path in folder.glob(f"{stem}.1-*"):
        for line in path.read_text().splitlines():
            if line.startswith("summary:"):
                counts[int(path.name.rsplit("-", 1)[1])] = int(line.split()[1])
    return counts


def instructions(steps: int, skip: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The plain and the instrumented run side by side under callgrind (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        for tracked in (False, True):
            out = Path(tmp, str(int(tracked)))
            out.mkdir()
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
            cmd += [f"--callgrind-out-file={out}/cg", sys.executable, str(HERE), "--child", str(int(tracked))]
            cmd += ["--steps", str(steps), "--skip", str(skip), "--result", f"{out}/result.json"]
            base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
            env = dict(base, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", TRAINCARD_DIR=f"{out}/store")
            env[CALLGRIND] = "1"
            log = open(f"{out}/stdout.log", "wb")  # noqa: SIM115  (closed with the process below)
            procs[tracked] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log), log)
        counts = {}
        for tracked, (proc, log) in procs.items():
            proc.wait()
            log.close()
            if proc.returncode != 0:
                tail = Path(tmp, str(int(tracked)), "stdout.log").read_bytes()[-2000:]
                raise RuntimeError(tail.decode(errors="replace"))
            counts[tracked] = callgrind_threads(Path(tmp, str(int(tracked))), "cg")
    n = steps - 1 - skip
    plain, instrumented = counts[False][1], counts[True][1]
    row = {
        "steps_counted": n,
        "plain_instructions_per_step": plain / n,
        "traincard_instructions_per_step": instrumented / n,
        "training_thread_change_pct": (instrumented / plain - 1) * 100,
    }
    return [row], {"threads": {str(k): v for k, v in counts.items()}}
