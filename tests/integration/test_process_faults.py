"""Faults in the training process itself, each in a real process: a clock that jumps backwards,
eight threads reporting at once, and an interpreter that exits without ``close()``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import traincard_otel
from traincard_otel._read.card.render import render_data

from tests.support.helpers import card_payload, subprocess_env


def _run(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_SYSTEM="false", **env),
    )


def test_a_clock_jumping_backwards_keeps_every_step_in_order(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import time, traincard_otel
        real = time.time
        offset = [0.0]
        time.time = lambda: real() + offset[0]  # NTP stepping the wall clock back an hour mid-run
        r = traincard_otel.configure()
        for step in range(1, 201):
            if step == 100:
                offset[0] = -3600.0
            r.metrics({"loss": 1.0 / step}, step=step)
            r.step_end(step, duration_s=0.001)
        """,
        TRAINCARD_FLUSH_INTERVAL="0.1",
    )
    assert out.returncode == 0, out.stderr
    run = traincard_otel.load(tmp_path / "store")
    assert run.metrics["loss"].steps == list(range(1, 201))  # kept, in step order, none lost
    assert run.step_times[0].steps == list(range(1, 201))
    assert not [e for e in run.events if e["name"] == "traincard.run.rewind"]  # time is not progress
    assert run.status["status"] == "finished"
    payload = card_payload(render_data(run, live=False, final=True))
    assert payload["run"]["step"] == 200


def test_eight_threads_reporting_at_once_lose_nothing(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import threading, traincard_otel
        r = traincard_otel.configure(report_ranks="all")
        barrier = threading.Barrier(8)
        def work(i):
            barrier.wait()
            for step in range(1, 2001):
                r.metrics({f"thread{i}.value": float(step)}, step=step)
                if step % 100 == 0:
                    r.log(f"thread {i} at {step}")
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(r.overflow)
        """,
        TRAINCARD_FLUSH_INTERVAL="0.05",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"]  # nothing dropped on the hot path
    run = traincard_otel.load(tmp_path / "store")
    for i in range(8):
        assert run.metrics[f"thread{i}.value"].steps == list(range(1, 2001)), i
    assert sum(1 for line in run.logs if line["message"].startswith("thread ")) == 160
    assert not run.status.get("rejected") and not run.status.get("dropped")
    assert "Traceback" not in out.stderr


def test_exit_without_close_keeps_the_end_of_the_run_and_says_finished(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import traincard_otel
        r = traincard_otel.Reporter()
        for step in range(1, 51):
            r.metric("loss", 1.0 / step, step)
        r.log("last words")
        """,
        TRAINCARD_FLUSH_INTERVAL="3600",  # nothing written before exit: exit must write it all
    )
    assert out.returncode == 0, out.stderr
    run = traincard_otel.load(tmp_path / "store")
    assert run.metrics["loss"].steps == list(range(1, 51))
    assert run.logs[-1]["message"] == "last words"
    assert run.status["status"] == "finished"
