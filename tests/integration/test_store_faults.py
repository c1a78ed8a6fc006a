"""Storage faults, each in a real process: an S3 outage and its end, a full disk, a read-only store,
corrupt and truncated segments, and an interpreter exit without ``close()`` on every backend."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.writer import StoreWriter

from tests.support.helpers import subprocess_env
from tests.support.store_faults import Child, assert_whole_run, child_env, exit_without_close, load_in_child


# -- the S3 endpoint goes away and comes back --------------------------------------------------------
@pytest.mark.slow
def test_s3_outage_is_counted_live_and_everything_is_written_when_it_comes_back(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    pytest.importorskip("metaflow")
    from tests.support.s3_server import BUCKET, CREDENTIALS, s3_server_process

    with s3_server_process() as server:
        env = child_env(
            **CREDENTIALS,
            METAFLOW_S3_ENDPOINT_URL=server.url,
            TRAINCARD_DIR=f"s3://{BUCKET}/runs",
            TRAINCARD_RUN_NAME="outage",
            METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path),
        )
        child = Child(env, tmp_path / "done")
        child.wait_for("step 300", lambda: child.step >= 300, 60)
        assert child.health[-1]["write_errors"] == 0
        server.stop()
        child.wait_for(
            "write errors while S3 is down",
            lambda: (
                bool(child.health) and child.health[-1]["write_errors"] >= 2 and child.health[-1]["retrying"]
            ),
            30,
        )
        down = child.health[-1]
        assert down["last_error"] and "\n" not in down["last_error"] and down["last_error_at"] > 0
        assert down["pending_rows"] > 0  # what waits is said, not dropped
        step_at_down = child.step
        server.start()
        child.wait_for("writes to resume", lambda: not child.health[-1]["retrying"], 40)
        assert child.step > step_at_down  # training went on all along
        code, err = child.finish()
        assert code == 0, err[-3000:]
        assert "cannot schedule new futures" not in err
        assert_whole_run(load_in_child(f"s3://{BUCKET}/runs/outage", env), child.last)
        (state,) = load_in_child(f"s3://{BUCKET}/runs/outage", env)["states"]
        health = state["store_health"]
        assert health["write_errors"] >= 2 and health["last_error"] and health["retrying"] is False
        assert health["pending_rows"] == 0
        assert not list(tmp_path.rglob("seg-*"))  # the store lives in the bucket only


@pytest.mark.slow
def test_a_frozen_s3_endpoint_costs_one_bounded_attempt_and_no_step_time(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    pytest.importorskip("metaflow")
    import signal

    from traincard_otel._store.datastore_calls import CONNECT_TIMEOUT_S, READ_TIMEOUT_S

    from tests.support.s3_server import BUCKET, CREDENTIALS, s3_server_process

    # A read timeout set by the user (Metaflow's client parameters win key by key) bounds the
    # attempt as the default one does, in less of the test's time.
    read_timeout_s = 3.0
    assert read_timeout_s < READ_TIMEOUT_S
    with s3_server_process() as server:
        assert server.proc is not None
        env = child_env(
            **CREDENTIALS,
            METAFLOW_S3_ENDPOINT_URL=server.url,
            METAFLOW_DATATOOLS_CLIENT_PARAMS=json.dumps({"config": {"read_timeout": read_timeout_s}}),
            TRAINCARD_DIR=f"s3://{BUCKET}/frozen",
        )
        child = Child({**env, "TRAINCARD_RUN_NAME": "r"}, tmp_path / "done")
        child.wait_for("step 300", lambda: child.step >= 300, 60)
        server.proc.send_signal(signal.SIGSTOP)  # accepts connections, never answers
        try:
            step = child.step
            took = child.wait_for(
                "a write to give up",
                lambda: bool(child.health) and child.health[-1]["write_errors"] >= 1,
                60,
            )
            # One attempt: at most a connect and a read timeout (and botocore's 1 s wait for
            # "100 Continue"), after at most one flush interval; never Metaflow's minutes of retries.
            assert took < CONNECT_TIMEOUT_S + read_timeout_s + 3, took
            assert "timeout" in child.health[-1]["last_error"].lower()
            assert child.step >= step + 1000  # training went on at full pace meanwhile
        finally:
            server.proc.send_signal(signal.SIGCONT)
        child.wait_for("writes to resume", lambda: not child.health[-1]["retrying"], 60)
        code, err = child.finish()
        assert code == 0, err[-3000:]
        assert_whole_run(load_in_child(f"s3://{BUCKET}/frozen/r", env), child.last)


# -- the local disk fills up or turns read-only ----------------------------------------------------
class _FullDisk(LocalBackend):
    """A directory on a disk that is full until ``space`` is set."""

    space = False

    def write(self, name: str, data: bytes) -> None:
        if not self.space:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        super().write(name, data)


def test_a_full_disk_is_counted_and_nothing_is_lost_once_there_is_room(tmp_path: Path) -> None:
    backend = _FullDisk(tmp_path)
    writer = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=60)
    writer.set_state({"status": "running"})
    for step in range(1, 51):
        writer.add(segment.metric_run("train", ["loss"], [step], [0.0], [1.0 / step]))
        if step % 10 == 0:
            assert writer.flush_now() is False
    health = writer.store_health
    assert health["write_errors"] == 5 and health["retrying"] and health["pending_rows"] == 50
    assert health["last_error"].startswith("OSError: [Errno 28] No space left on device")
    assert not list(tmp_path.rglob("seg-*"))
    backend.space = True
    assert writer.flush_now() is True
    run = traincard_otel.load(tmp_path)
    assert run.metrics["loss"].steps == list(range(1, 51))
    (state,) = run.states
    assert state["store_health"]["write_errors"] == 5 and state["store_health"]["pending_rows"] == 0
    assert not state["store_health"]["retrying"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_store_is_a_counted_error_and_training_goes_on(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "ro").mkdir(parents=True)
    (store / "ro").chmod(0o555)
    try:
        child = Child(child_env(TRAINCARD_DIR=str(store), TRAINCARD_RUN_NAME="ro"), tmp_path / "done")
        child.wait_for(
            "a counted write error", lambda: bool(child.health) and child.health[-1]["write_errors"] >= 1, 30
        )
        step = child.step
        child.wait_for("training to go on", lambda: child.step >= step + 300, 30)
        code, err = child.finish()
    finally:
        (store / "ro").chmod(0o755)
    assert code == 0
    assert "PermissionError" in child.health[-1]["last_error"]
    assert "could not be written before exit" in err
    assert not list(store.rglob("seg-*"))


def test_a_real_full_disk_is_counted_live_and_nothing_is_lost_once_there_is_room(tmp_path: Path) -> None:
    from tests.support.tmpfs import tmpfs

    with tmpfs(tmp_path / "disk", "64k") as disk:
        child = Child(child_env(TRAINCARD_DIR=str(disk.path), TRAINCARD_RUN_NAME="r"), tmp_path / "done")
        child.wait_for(
            "the disk to fill up",
            lambda: bool(child.health) and child.health[-1]["write_errors"] >= 2,
            60,
        )
        full = child.health[-1]
        assert "No space left on device" in full["last_error"] and full["retrying"]
        step = child.step
        child.wait_for("training to go on", lambda: child.step >= step + 300, 30)
        disk.remount("size=16m")
        child.wait_for("writes to resume", lambda: not child.health[-1]["retrying"], 40)
        code, err = child.finish()
        assert code == 0, err[-3000:]
        got = load_in_child(str(disk.path / "r"), subprocess_env())
    assert_whole_run(got, child.last)
    (state,) = got["states"]
    assert state["store_health"]["write_errors"] >= 2 and not state["store_health"]["retrying"]
    assert got["stats"]["dropped"] == {}


def test_a_store_turned_read_only_is_a_counted_error_and_training_goes_on(tmp_path: Path) -> None:
    from tests.support.tmpfs import tmpfs

    with tmpfs(tmp_path / "disk", "16m") as disk:
        child = Child(child_env(TRAINCARD_DIR=str(disk.path), TRAINCARD_RUN_NAME="r"), tmp_path / "done")
        child.wait_for("step 300", lambda: child.step >= 300, 60)
        time.sleep(1.0)  # a few flushes: step 300 is on the disk
        disk.remount("ro")
        child.wait_for(
            "a counted write error", lambda: bool(child.health) and child.health[-1]["write_errors"] >= 2, 30
        )
        assert "Read-only file system" in child.health[-1]["last_error"]
        step = child.step
        child.wait_for("training to go on", lambda: child.step >= step + 300, 30)
        code, err = child.finish()
        assert code == 0, err[-3000:]
        assert "telemetry records could not be written before exit" in err  # the loss is said at exit
        got = load_in_child(str(disk.path / "r"), subprocess_env())
    steps = got["steps"]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 300  # what was written before is whole
    assert got["status"] == "running"  # the last state written before the disk turned read-only


# -- damaged segments ------------------------------------------------------------------------------
def test_a_corrupt_and_a_truncated_segment_are_skipped_and_counted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    child = Child(child_env(TRAINCARD_DIR=str(store), TRAINCARD_RUN_NAME="r"), tmp_path / "done")
    child.wait_for("step 500", lambda: child.step >= 500, 60)
    code, err = child.finish()
    assert code == 0, err[-2000:]
    segs = sorted((store / "r").rglob("seg-*.jsonl"))
    assert len(segs) >= 3
    whole = load_in_child(str(store / "r"), subprocess_env())
    assert_whole_run(whole, child.last)
    segs[0].write_bytes(b"\x00\xff garbage \x00" * 50)  # corrupt
    data = segs[1].read_bytes()
    segs[1].write_bytes(data[: len(data) // 2])  # truncated mid-record
    got = load_in_child(str(store / "r"), subprocess_env())
    assert got["stats"]["corrupt_segments"] == 2
    kept = set(got["steps"])
    assert kept < set(whole["steps"]) and len(got["steps"]) == len(kept)
    assert max(kept) == child.last  # the segments after the damaged ones are all read
    assert got["status"] == "finished"


# -- exit without close() on every backend -----------------------------------------------------------
def test_exit_without_close_keeps_everything_on_a_local_store(tmp_path: Path) -> None:
    env = child_env(TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_RUN_NAME="r")
    exit_without_close(env, str(tmp_path / "store" / "r"), tmp_path)


@pytest.mark.slow
def test_exit_without_close_keeps_everything_on_s3(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    pytest.importorskip("metaflow")
    from tests.support.s3_server import BUCKET, CREDENTIALS, s3_server

    with s3_server() as url:
        env = child_env(**CREDENTIALS, METAFLOW_S3_ENDPOINT_URL=url, TRAINCARD_DIR=f"s3://{BUCKET}/exit")
        exit_without_close({**env, "TRAINCARD_RUN_NAME": "r"}, f"s3://{BUCKET}/exit/r", tmp_path)
