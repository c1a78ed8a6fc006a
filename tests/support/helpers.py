"""Helpers shared by tests: child processes' environment, card payloads, Metaflow's client in a child."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for child Python processes: this venv first on PATH, no inherited OTel/traincard vars."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_", "PYTEST_"))}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("USER", "traincard")
    env.update(extra)
    return env


def kill_processes_with_env(key: str, value: str) -> None:
    """SIGKILL every process whose environment holds ``key=value``: what a test started and that
    left its process group (torch elastic starts each rank in a session of its own), so that no
    rank of a hung gang outlives its test and loads the machine under the tests after it."""
    needle = f"{key}={value}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # ended meanwhile, or not ours to read
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)


_PAYLOAD = re.compile(r'<script type="application/json" id="tc-payload">(.*?)</script>', re.S)


def card_payload(html: str) -> dict[str, Any]:
    """The payload embedded in a card page."""
    match = _PAYLOAD.search(html)
    assert match, "card has no embedded payload"
    return json.loads(match.group(1))


def metaflow_client(code: str, pathspec: str, cwd: Path, env: dict[str, str]) -> Any:
    """Run Metaflow client code in a child process (Metaflow reads its datastore config at import)
    with ``sys.argv[1] = pathspec``; returns the JSON it prints last."""
    prog = "import json, sys, metaflow, traincard_otel\nmetaflow.namespace(None)\n" + code
    out = subprocess.run(
        [sys.executable, "-c", prog, pathspec], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


#: The run-bookkeeping figures an HF Trainer logs (each belongs in the card's summary table).
HF_BOOKKEEPING = (
    "eval_runtime",
    "eval_samples_per_second",
    "eval_steps_per_second",
    "total_flos",
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
)


def series(name: str, steps: list[int], value: float = 1.0) -> Any:
    """A rank-0, attempt-0 :class:`traincard_otel.Series` at ``steps`` (values rising from ``value``,
    times 1000 s + step)."""
    from traincard_otel import Series

    n = len(steps)
    return Series(
        name=name,
        steps=list(steps),
        values=[value + i / 100 for i in range(n)],
        times=[1000.0 + s for s in steps],
        attempts=[0] * n,
        ranks=[0] * n,
    )
