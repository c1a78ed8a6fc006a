"""Metaflow `resume`: a cloned training task has no telemetry of its own; load() follows its origin."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, metaflow_client, subprocess_env

pytest.importorskip("metaflow")


@pytest.mark.slow
def test_cloned_task_reads_its_origin_runs_telemetry(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "integration" / "flows" / "failure_flow.py", tmp_path / "failure_flow.py")
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path), TRAINCARD_SYSTEM="false")

    def flow(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "failure_flow.py", "--no-pylint", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    first = flow("run", "--mode", "none", "--steps", "30")
    origin_run = re.search(r"\[(\d+)/train/(\d+) ", first).group(1)  # type: ignore[union-attr]
    second = flow("resume", "--origin-run-id", origin_run, "end")
    new_run = re.search(r"\[(\d+)/end/\d+ ", second).group(1)  # type: ignore[union-attr]
    assert new_run != origin_run
    code = (
        "task = next(iter(metaflow.Run(sys.argv[1])['train']))\n"
        "run = traincard_otel.load(task)\n"
        "print(json.dumps({'source': run.source, 'steps': list(run.metrics['loss'].steps),\n"
        "                  'origin': task.origin_pathspec}))"
    )
    got = metaflow_client(code, f"FailureFlow/{new_run}", tmp_path, env)
    assert got["origin"].startswith(f"FailureFlow/{origin_run}/train/")
    assert got["source"] == got["origin"]  # the clone's store is its origin's
    assert got["steps"] == list(range(1, 31))
