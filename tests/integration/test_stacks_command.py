"""``traincard stacks`` against a live job whose store is on S3 (an S3-compatible server on
loopback): the request goes through the bucket, the rank's watchdog answers, no port is opened.
Against a run that ended, it says so at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO, subprocess_env
from tests.support.s3_server import BUCKET, metaflow_s3_env, s3_server

pytest.importorskip("moto")
pytest.importorskip("metaflow")


@pytest.mark.slow
def test_stacks_of_a_live_job_on_s3() -> None:
    with s3_server() as endpoint:
        store = f"s3://{BUCKET}/runs/live"
        env = subprocess_env(
            **metaflow_s3_env(endpoint),
            TRAINCARD_STORE=store,
            TRAINCARD_SYSTEM="false",
            TRAINCARD_FLUSH_INTERVAL="0.5",
        )
        job = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "integration" / "scripts" / "live_rank.py")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert job.stdout is not None and job.stdout.readline().strip() == "ready"
            out = subprocess.run(
                [sys.executable, "-m", "traincard_otel", "stacks", store, "--timeout", "30", "--all-threads"],
                env=env,
                capture_output=True,
                text=True,
                timeout=90,
            )
            assert out.returncode == 0, out.stderr[-3000:]
            lines = out.stdout.splitlines()
            assert lines[0] == "1 of 1 running ranks answered"
            assert lines[1].startswith("rank 0: in serve_forever at live_rank.py:")
            assert any(line.endswith("in serve_forever") and "live_rank.py:" in line for line in lines)
            assert any("thread traincard-watchdog" in line for line in lines)  # --all-threads
        finally:
            job.send_signal(signal.SIGKILL)
            job.wait(30)


def test_stacks_of_a_run_that_ended_fail_at_once_and_write_nothing(store_dir: Path) -> None:
    reporter = traincard_otel.configure()
    reporter.step_end(3, duration_s=0.01)
    traincard_otel.shutdown()
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "stacks", str(store_dir), "--timeout", "30"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 2 and time.monotonic() - t0 < 20  # not the 30 s of waiting for answers
    assert "no rank of store is running (the run is finished)" in out.stderr
    assert not (store_dir / "requests").exists()
