"""``traincard profile`` against live jobs: a raw loop, an HF Trainer, a two-rank torchrun gang and
a job whose store is on the S3 emulator. Each rank asked captures its next steps with
torch.profiler and writes a gzip'd Chrome trace and its summary into the store; the command says
where the traces are. Against a run that ended it says so at once."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO, subprocess_env

pytest.importorskip("torch")

SCRIPTS = REPO / "tests" / "integration" / "scripts"
SCRIPT = SCRIPTS / "raw_loop.py"


@contextmanager
def _live(command: list[str], env: dict[str, str], ready: bool = True) -> Iterator[subprocess.Popen[str]]:
    job = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        if ready:
            assert job.stdout is not None
            line = job.stdout.readline().strip()
            assert line == "ready", (line, job.stderr.read() if job.poll() is not None and job.stderr else "")
        yield job
    finally:
        # SIGTERM first: torchrun passes it on to its ranks, which live in sessions of their own
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)


def _profile(target: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traincard_otel", "profile", target, "--steps", "3", "--wait", "90", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )


def _exported(target: str, env: dict[str, str], folder: Path) -> bytes:
    """The latest capture's trace, copied out as the command tells the user to."""
    out = folder / "trace.json.gz"
    cp = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "export", target, "--profile", "latest", "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith(f"wrote {out} (capture ")
    return out.read_bytes()


def _trace_events(data: bytes) -> list[dict[str, object]]:
    """A trace as Perfetto reads it: gzip'd JSON with ``traceEvents``."""
    trace = json.loads(gzip.decompress(data))
    events = trace["traceEvents"]
    assert isinstance(events, list) and len(events) > 50
    assert any(e.get("ph") == "X" and str(e.get("name", "")).startswith("aten::") for e in events)
    return events


def _check_capture(run: traincard_otel.LoadedRun, ranks: list[int]) -> dict[str, object]:  # type: ignore[name-defined]
    [capture] = run.profiles
    assert sorted(capture["ranks"]) == ranks and capture["trigger"] == "request"
    first, last = capture["steps"]
    assert last - first == 2  # --steps 3
    for summary in capture["ranks"].values():
        host = summary["operators"]["host"]
        assert host and all(o["self_cpu_ms"] >= 0 for o in host)
        b = summary["breakdown"]
        assert not b["device"] and set(b["seconds"]) == {"computation", "communication", "other"}
        assert sum(b["shares"].values()) == pytest.approx(1.0)
        assert summary["cost"]["start_s"] >= 0 and summary["cost"]["step_during_s"] > 0
        _trace_events(Path(summary["trace_location"]).read_bytes())  # a local store: a path
    return capture


@pytest.mark.slow
def test_profile_a_live_raw_loop(tmp_path: Path) -> None:
    store = tmp_path / "run"
    env = subprocess_env(TRAINCARD_STORE=str(store), TRAINCARD_SYSTEM="false", TRAINCARD_FLUSH_INTERVAL="0.5")
    with _live([sys.executable, str(SCRIPT)], env):
        out = _profile(str(store), env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("asked 1 running rank(s) of") and "to profile 3 steps" in lines[0]
    assert lines[1].startswith("captured steps ") and lines[1].endswith(" on 1 of 1 ranks")
    run = traincard_otel.load(store)
    capture = _check_capture(run, [0])
    assert f"rank 0: {capture['ranks'][0]['trace_location']}" in out.stdout
    assert "top operators: " in out.stdout and "ui.perfetto.dev" in out.stdout
    # the trace copied out, as the command says
    _trace_events(_exported(str(store), env, tmp_path))


@pytest.mark.slow
def test_profile_a_live_hf_trainer(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    store = tmp_path / "run"
    env = subprocess_env(
        TRAINCARD_STORE=str(store),
        TRAINCARD_SYSTEM="false",
        TRAINCARD_FLUSH_INTERVAL="0.5",
        LIVE_OUTPUT=str(tmp_path / "out"),
    )
    with _live([sys.executable, str(SCRIPTS / "live_hf.py")], env):
        out = _profile(str(store), env)
    assert out.returncode == 0, out.stderr[-3000:]
    capture = _check_capture(traincard_otel.load(store), [0])
    names = {o["name"] for o in capture["ranks"][0]["operators"]["host"]}
    assert any(n.startswith("aten::") for n in names)


@pytest.mark.slow
def test_profile_a_live_torchrun_gang(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed next to this interpreter")
    env = subprocess_env(
        TRAINCARD_DIR=str(tmp_path), TRAINCARD_SYSTEM="false", TRAINCARD_FLUSH_INTERVAL="0.5"
    )
    with _live([torchrun, "--nproc_per_node=2", "--max-restarts=0", str(SCRIPT)], env, ready=False):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # both ranks running and stepping
            stores = list(tmp_path.iterdir())
            if stores:
                states = traincard_otel.load(stores[0]).states
                if (
                    len([s for s in states if s.get("status") == "running" and (s.get("step") or 0) >= 3])
                    == 2
                ):
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the gang did not start")
        [store] = stores
        out = _profile(str(store), env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "on 2 of 2 ranks" in out.stdout.splitlines()[1]
    capture = _check_capture(traincard_otel.load(store), [0, 1])
    # both ranks recorded the gradients' all-reduce (gloo) as communication
    for summary in capture["ranks"].values():
        assert summary["breakdown"]["seconds"]["communication"] > 0


@pytest.mark.slow
def test_profile_a_live_job_on_s3(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    pytest.importorskip("metaflow")
    from tests.support.s3_server import BUCKET, metaflow_s3_env, s3_server

    with s3_server() as endpoint:
        store = f"s3://{BUCKET}/runs/live-profile"
        env = subprocess_env(
            **metaflow_s3_env(endpoint),
            TRAINCARD_STORE=store,
            TRAINCARD_SYSTEM="false",
            TRAINCARD_FLUSH_INTERVAL="0.5",
        )
        with _live([sys.executable, str(SCRIPT)], env):
            out = _profile(store, env)
        assert out.returncode == 0, out.stderr[-3000:]
        assert f"rank 0: {store}/profiles/" in out.stdout  # where the trace is, in the bucket
        _trace_events(_exported(store, env, tmp_path))


def test_profile_a_run_that_ended_fails_at_once_in_one_line(store_dir: Path) -> None:
    reporter = traincard_otel.configure()
    reporter.step_end(3, duration_s=0.01)
    traincard_otel.shutdown()
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "profile", str(store_dir)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 2 and time.monotonic() - t0 < 20  # not the 90 s of waiting for captures
    assert out.stderr.strip().count("\n") == 0  # one line
    assert "no rank of store is running (the run is finished)" in out.stderr
    assert not (store_dir / "requests").exists() and not (store_dir / "profiles").exists()
