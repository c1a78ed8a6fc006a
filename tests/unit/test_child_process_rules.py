"""A child process is not a rank (the rules, and a real fork of a running pipeline), and system
series come out of the reader and the card in time order, one point per time and rank."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

import traincard_otel
from traincard_otel._read.load.reader import Series
from traincard_otel._read.load.time_order import in_time_order
from traincard_otel._schema import Event
from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.pipeline import children
from traincard_otel._write.pipeline.children import ParentOnlyPeriodicReader

from tests.support.helpers import series, subprocess_env

PARENT = {"TRAINCARD_DIR": "/data", "PATH": "/bin"}


def claimed(env: dict[str, str], pid: int = 100) -> dict[str, str]:
    out = dict(env)
    out[children.ENV_PARENT] = f"{pid} {children.rank_variables(env)}"
    return out


def test_a_child_with_the_parents_rank_variables_is_no_rank() -> None:
    assert children.parent_pid(claimed(PARENT), pid=200) == 100  # a DataLoader worker, a subprocess
    assert children.parent_pid(claimed(PARENT), pid=100) is None  # the reporting process itself
    assert children.parent_pid(PARENT, pid=200) is None  # nobody reports above it
    torchrun_rank = claimed(PARENT) | {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}
    assert children.parent_pid(torchrun_rank, pid=200) is None  # a launcher gave it a rank
    rank1 = {**PARENT, "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"}
    assert children.parent_pid(claimed(rank1), pid=300) == 100  # rank 1's own DataLoader worker
    slurm = claimed({**PARENT, "SLURM_PROCID": "3", "SLURM_NTASKS": "4"})
    assert children.parent_pid(slurm | {"SLURM_PROCID": "5"}, pid=200) is None
    node = claimed({**PARENT, "TRAINCARD_NODE_INDEX": "0", "TRAINCARD_LAUNCHER_PID": "100"})
    assert (
        children.parent_pid(node | {"TRAINCARD_NODE_INDEX": "1", "TRAINCARD_LAUNCHER_PID": "400"}, 400)
        is None
    )


def test_a_process_that_reports_marks_its_children_and_a_child_gets_no_pipeline(store_dir: Path) -> None:
    reporter = traincard_otel.Reporter()
    assert reporter.enabled
    assert os.environ[children.ENV_PARENT].split(" ")[0] == str(os.getpid())
    reporter.close()
    os.environ[children.ENV_PARENT] = f"{os.getpid() + 1} {children.rank_variables(os.environ)}"
    assert not traincard_otel.Reporter().enabled  # as a spawned worker inheriting the environment


def test_a_forked_child_leaves_the_parents_pipeline_silent(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINCARD_SYSTEM", "true")
    monkeypatch.setenv("TRAINCARD_SYSTEM_INTERVAL", "0.1")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "console")  # a periodic metric reader, as OTLP has
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
    reporter = traincard_otel.Reporter(flush_interval_s=0.1)
    reporter.step_end(1, duration_s=0.01)
    time.sleep(0.3)
    # Metric readers of other code in this process (a tracker an earlier test ran) restart in a
    # child as the SDK makes them: only ours must not.
    foreign = sum(
        1
        for o in gc.get_objects()
        if isinstance(o, PeriodicExportingMetricReader) and not isinstance(o, ParentOnlyPeriodicReader)
    )
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it finds, then leave without running any exit hook
        try:
            time.sleep(0.5)  # a restarted metric reader would have exported several times by now
            pipeline = _pipeline.active()
            found = {
                "active": pipeline is not None,
                "threads": sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()),
                "enabled": traincard_otel.Reporter().enabled,
            }
            os.write(write, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    found = json.loads(os.read(read, 65536))
    os.close(read)
    assert found["active"] is False and found["enabled"] is False
    # The OTel SDK's batch processors restart an idle worker (it holds nothing: the copy's queue is
    # emptied and nothing is emitted here); nothing of ours runs and no metric reader exports.
    assert [t for t in found["threads"] if not t.startswith("Otel")] == []
    assert found["threads"].count("OtelPeriodicExportingMetricReader") <= foreign
    reporter.step_end(2, duration_s=0.01)
    reporter.close()
    run = traincard_otel.load(store_dir)
    assert [s["pid"] for s in run.states] == [os.getpid()]
    assert [e["name"] for e in run.events if e["name"] == Event.run_ended("finished")] == [
        Event.run_ended("finished")
    ]
    times = run.system["system.cpu.utilization"].times
    assert list(times) == sorted(set(times))


def test_a_forked_copy_of_a_store_writer_writes_nothing(tmp_path: Path) -> None:
    from traincard_otel._write.store.writer import StoreWriter

    writer = StoreWriter(LocalBackend(tmp_path), attempt=0, rank=0)
    writer.add({"k": "x", "t": 1.0, "n": "system.cpu.utilization", "v": 0.5})
    pid = os.fork()
    if pid == 0:
        try:
            writer.add({"k": "x", "t": 2.0, "n": "system.cpu.utilization", "v": 0.0})
            writer.flush_now()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert list(tmp_path.rglob("*")) == []  # the child wrote nothing, not even the parent's buffer
    assert writer.flush_now()
    (seg,) = tmp_path.rglob("seg-*.jsonl")
    records, _corrupt = segment.decode(seg.read_bytes())
    assert [r["t"] for r in records] == [1.0]


def test_in_time_order_sorts_and_keeps_one_point_per_time_and_rank() -> None:
    ordered = series("system.cpu.utilization", [1, 2, 3])
    assert in_time_order(ordered) is ordered
    mixed = Series(
        name="hw.gpu.utilization",
        steps=[None] * 6,
        values=[0.9, 0.0, 0.8, 0.0, 0.7, 0.5],
        times=[10.0, 5.0, 11.0, 5.0, 12.0, 12.0],
        attempts=[0] * 6,
        ranks=[0, 0, 0, 0, 0, 1],
    )
    out = in_time_order(mixed)
    assert list(out.times) == [5.0, 10.0, 11.0, 12.0, 12.0]
    assert list(out.values) == [0.0, 0.9, 0.8, 0.7, 0.5] and list(out.ranks) == [0, 0, 0, 0, 1]
    grown = series("x", [1, 2, 3])
    grown.times.append(1002.5)  # only the new point is compared, with the one before it
    grown.values.append(1.0)
    for column in (grown.steps, grown.attempts, grown.ranks):
        column.append(0)
    assert list(in_time_order(grown, checked=3).times) == [1001.0, 1002.0, 1002.5, 1003.0]


def test_the_reader_gives_system_series_in_time_order(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    point = {"k": "x", "n": "system.cpu.utilization", "u": "1"}
    # A second writer of the same rank whose points fall between and onto the first one's.
    for writer, times in (("wa", [1.0, 3.0, 5.0]), ("wb", [2.0, 3.0, 4.0])):
        backend.write(
            f"a0/r0/{writer}/seg-00000001.jsonl", segment.encode([{**point, "t": t, "v": t} for t in times])
        )
    run = traincard_otel.load(tmp_path)
    assert list(run.system["system.cpu.utilization"].times) == [1.0, 2.0, 3.0, 4.0, 5.0]


GROUP_CHILD = """
import sys, torch.distributed as dist, traincard_otel
if sys.argv[1] == "group":
    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
print(traincard_otel.Reporter().enabled)
"""


@pytest.mark.parametrize("group", [True, False])
def test_a_child_that_joins_a_process_group_itself_is_a_rank(
    group: bool, store_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    reporter = traincard_otel.Reporter()  # the parent reports: its children inherit the marker
    env = subprocess_env(
        TRAINCARD_DIR=str(store_dir), **{children.ENV_PARENT: os.environ[children.ENV_PARENT]}
    )
    mode = "group" if group else "plain"
    out = subprocess.run(
        [sys.executable, "-c", GROUP_CHILD, mode, str(tmp_path / "pg")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [
        str(group)
    ]  # torch.multiprocessing.spawn workers do; a plain child does not
    reporter.close()


def test_a_forked_child_of_a_process_group_member_is_no_rank(store_dir: Path, tmp_path: Path) -> None:
    dist = pytest.importorskip("torch.distributed")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        reporter = traincard_otel.Reporter()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # a DataLoader worker of a DDP rank: the group it sees is its parent's
            try:
                os.write(write, str(traincard_otel.Reporter().enabled).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        assert os.read(read, 100) == b"False"
        os.close(read)
        reporter.close()
    finally:
        dist.destroy_process_group()


def _sigterm_disposition(_: object = None) -> str:
    return str(signal.getsignal(signal.SIGTERM))


def test_pool_workers_forked_from_a_reporting_process_die_of_pool_terminate(store_dir: Path) -> None:
    """``Pool.terminate()`` ends its workers with SIGTERM. Through the parent's Python-level handler,
    inherited by the fork, a worker blocked on the task queue's lock did not always die of it (about
    one exit in 17), and the parent waited for it forever: a forked child gets SIGTERM's disposition
    from before the parent installed its handler."""
    import multiprocessing

    from traincard_otel._write.pipeline import process_exit

    reporter = traincard_otel.Reporter()
    assert reporter.enabled and signal.getsignal(signal.SIGTERM) is process_exit._on_sigterm
    before = process_exit._prev_sigterm
    ctx = multiprocessing.get_context("fork")
    for attempt in range(30):
        pool = ctx.Pool(2)
        dispositions = set(pool.map(_sigterm_disposition, range(4)))
        ender = threading.Thread(target=pool.terminate, daemon=True)
        ender.start()
        ender.join(10)
        if ender.is_alive():
            for worker in pool._pool:  # type: ignore[attr-defined]  # not to leave them behind
                with contextlib.suppress(OSError):
                    os.kill(worker.pid, signal.SIGKILL)
            pytest.fail(f"Pool.terminate() still waits for its workers after 10 s (exit {attempt + 1})")
        assert dispositions == {str(before if before is not None else signal.SIG_DFL)}
    assert signal.getsignal(signal.SIGTERM) is process_exit._on_sigterm  # the parent keeps its own
    reporter.close()


def test_a_forked_child_that_reports_on_its_own_gets_the_sigterm_handler_again(store_dir: Path) -> None:
    """A rank forked by its launcher (``start_method="fork"``) is no child: its pipeline must end
    a run cleanly on SIGTERM as any rank's does."""
    from traincard_otel._write.pipeline import process_exit, registry

    reporter = traincard_otel.Reporter()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            after_fork = signal.getsignal(signal.SIGTERM) is process_exit._on_sigterm
            process_exit.install(registry.active)  # as the child's own pipeline start does
            reinstalled = signal.getsignal(signal.SIGTERM) is process_exit._on_sigterm
            os.write(write, json.dumps([after_fork, reinstalled]).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert json.loads(os.read(read, 1024)) == [False, True]
    os.close(read)
    reporter.close()
