"""Real Metaflow runs of a flow whose first attempt fails (exception, SIGKILL, SIGTERM), retried
with @retry; and of the same flow running long with its live card."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env

pytest.importorskip("metaflow")
FLOW = REPO / "tests" / "integration" / "flows" / "failure_flow.py"
_PAYLOAD = re.compile(r'<script type="application/json" id="tc-payload">(.*?)</script>', re.S)


def run_flow(tmp_path: Path, *args: str, **env_vars: str) -> tuple[subprocess.CompletedProcess[str], str]:
    shutil.copy(FLOW, tmp_path / "failure_flow.py")
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path), TRAINCARD_SYSTEM="false", **env_vars)
    proc = subprocess.run(
        [sys.executable, "failure_flow.py", "--no-pylint", "run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    match = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-3000:]
    return proc, f"FailureFlow/{match.group(1)}/train/{match.group(2)}"


def cards(tmp_path: Path, pathspec: str) -> list[dict[str, Any]]:
    """Every traincard card of the task (one per attempt), as payloads, latest attempt last."""
    code = (
        "from metaflow.cards import get_cards\n"
        "print(json.dumps([c.get() for c in get_cards(metaflow.Task(sys.argv[1]), type='traincard')]))"
    )
    pages = metaflow_client(
        code, pathspec, tmp_path, subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path))
    )
    payloads = [card_payload(html) for html in pages if 'id="tc-payload"' in html]
    return sorted(payloads, key=lambda p: (p["run"]["attempt"], p["final"]))


@pytest.mark.slow
def test_retry_after_an_exception_continues_the_timeline(tmp_path: Path) -> None:
    proc, pathspec = run_flow(
        tmp_path, "--with", "retry:times=1,minutes_between_retries=0", "--mode", "raise"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    payloads = cards(tmp_path, pathspec)
    first = next(p for p in payloads if p["run"]["attempt"] == 0)
    assert first["final"] and first["run"]["status"] == "failed"
    assert "synthetic failure at step 25 on attempt 0" in first["failure"]["message"]
    last = payloads[-1]
    assert last["final"] and last["run"]["attempt"] == 1 and last["run"]["restarts"] == 1
    assert last["run"]["status"] == "finished"
    resumed = next(b for b in last["banners"] if b["kind"] == "resumed")
    assert "ended with RuntimeError" in resumed["text"] and "step 25" in resumed["text"]
    loss = next(c for c in last["charts"] if c["id"] == "loss")
    labels = [s["label"] for s in loss["series"]]
    assert labels == ["train", "train (resumed 1)"]  # both stretches of the timeline are kept
    assert loss["series"][0]["x"][-1] == 25 and loss["series"][1]["x"][0] == 15
    assert any(m["kind"] == "restart" for m in last["markers"])


@pytest.mark.slow
def test_an_attempt_killed_with_sigkill_is_reported_as_vanished_by_the_next(tmp_path: Path) -> None:
    proc, pathspec = run_flow(
        tmp_path, "--with", "retry:times=1,minutes_between_retries=0", "--mode", "sigkill"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = cards(tmp_path, pathspec)[-1]
    assert last["run"]["attempt"] == 1
    resumed = next(b for b in last["banners"] if b["kind"] == "resumed")
    assert "vanished" in resumed["text"]


@pytest.mark.slow
def test_sigterm_flushes_marks_terminated_and_leaves_a_final_card(tmp_path: Path) -> None:
    proc, pathspec = run_flow(tmp_path, "--mode", "sigterm")
    assert proc.returncode != 0
    payloads = cards(tmp_path, pathspec)
    final = [p for p in payloads if p["final"]]
    assert final, "no final card after SIGTERM"
    card = final[-1]
    assert card["run"]["status"] == "terminated"
    assert card["banners"][0]["kind"] == "terminated" and "SIGTERM" in card["banners"][0]["text"]
    loss = next(c for c in card["charts"] if c["id"] == "loss")
    assert loss["series"][0]["x"][-1] == 25  # everything up to the signal was flushed


@pytest.mark.slow
def test_live_card_refreshes_leave_no_temporary_files_behind(tmp_path: Path) -> None:
    # Metaflow writes each refresh's data to a temporary file that only the card subprocess
    # deletes, and drops a refresh asked for while that subprocess still runs. Card subprocesses
    # of 2 s and a refresh a second over 4 s of training: every other request would leave a file behind.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, pathspec = run_flow(
        tmp_path,
        *("--mode", "none", "--steps", "200", "--step_sleep", "0.02"),
        TMPDIR=str(tmp),
        SLOW_CARD_SECONDS="2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in tmp.iterdir() if p.suffix == ".json") == []
    last = cards(tmp_path, pathspec)[-1]
    assert last["final"] and last["run"]["status"] == "finished" and last["run"]["step"] == 200
