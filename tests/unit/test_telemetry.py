"""Host telemetry with real psutil; GPU telemetry through a small NVML fake."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from traincard_otel._write.telemetry import SystemSampler, host, procfs, rates, register_system_instruments
from traincard_otel._write.telemetry.gpu import GpuSampler, visible_devices

from tests.support.fakes.nvml import FakeNvml


def _value(snap, name, **attrs):  # type: ignore[no-untyped-def]
    for s in snap.samples:
        if s.name == name and all(s.attributes.get(k) == v for k, v in attrs.items()):
            return s.value
    raise KeyError(name)


@pytest.fixture(params=["procfs", "psutil"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Host figures read from /proc directly, and through psutil (hosts without a readable /proc)."""
    if request.param == "psutil":
        monkeypatch.setattr(procfs, "available", lambda: False)
    else:
        assert procfs.available()  # Linux, as CI is
    return str(request.param)


def test_host_figures_are_plausible(reader: str) -> None:
    sampler = SystemSampler(gpu=False)
    assert sampler.host.procfs == (reader == "procfs")
    sampler.sample_now()
    time.sleep(0.2)
    snap = sampler.sample_now()
    assert 0.0 <= _value(snap, "system.cpu.utilization") <= 1.0
    assert 0.0 <= _value(snap, "process.cpu.utilization") <= 1.0
    used = _value(snap, "system.memory.usage", **{"system.memory.state": "used"})
    assert 0 < used <= _value(snap, "system.memory.limit")
    assert 10 * 2**20 < _value(snap, "process.memory.usage") < 64 * 2**30


def test_disk_and_network_throughput_come_from_counter_deltas(tmp_path: Path, reader: str) -> None:
    sampler = SystemSampler(gpu=False)
    before = sampler.sample_now()
    with open(tmp_path / "blob", "wb") as fh:
        for _ in range(50):
            fh.write(os.urandom(2**20))
        fh.flush()
        os.fsync(fh.fileno())
    _send_over_loopback_tcp(20 * 2**20)
    time.sleep(0.1)
    after = sampler.sample_now()
    per_s = rates(before, after)
    write_key = ("system.disk.io", frozenset({("disk.io.direction", "write")}))
    assert per_s[write_key] * (after.time - before.time) >= 40 * 2**20
    receive_key = ("system.network.io", frozenset({("network.io.direction", "receive")}))
    assert per_s[receive_key] * (after.time - before.time) >= 20 * 2**20  # loopback counts too
    assert all(v >= 0 for v in per_s.values())


def _send_over_loopback_tcp(n: int) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    received = [0]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(2**20):
                received[0] += len(chunk)

    thread = threading.Thread(target=serve)
    thread.start()
    with socket.create_connection(server.getsockname()) as client:
        client.sendall(b"x" * n)
    thread.join(10)
    server.close()
    assert received[0] == n


_CHILD = (
    "import time\n"
    "b = bytearray(200 * 2**20)\n"
    "b[::4096] = b'x' * len(b[::4096])\n"
    "print('ok', flush=True)\n"
    "time.sleep(30)\n"
)


@pytest.mark.parametrize("walk", ["proc", "psutil"])
def test_child_process_memory_is_counted(monkeypatch: pytest.MonkeyPatch, walk: str, reader: str) -> None:
    monkeypatch.setattr(host, "TREE_REFRESH_S", 0.0)  # walk the process tree at every sample
    if walk == "psutil":  # where /proc/<pid>/task/*/children is missing
        monkeypatch.setattr(host, "child_pids", lambda pid: None)
    sampler = SystemSampler(gpu=False)
    base = _value(sampler.sample_now(), "process.memory.usage")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ok"
        grown = _value(sampler.sample_now(), "process.memory.usage")
        assert grown - base > 150 * 2**20
        assert child.pid in sampler.host._tree
    finally:
        child.kill()
        child.wait()


def test_procfs_readers_agree_with_psutil() -> None:
    files = procfs.Files()
    disk_before, net_before = host.psutil.disk_io_counters(), host.psutil.net_io_counters()
    read, written = procfs.disk_bytes(files, procfs.whole_disks())
    received, sent = procfs.network_bytes(files)
    disk_after, net_after = host.psutil.disk_io_counters(), host.psutil.net_io_counters()
    # Counters only grow: each figure lies between psutil's readings just before and just after.
    assert disk_before.read_bytes <= read <= disk_after.read_bytes
    assert disk_before.write_bytes <= written <= disk_after.write_bytes
    assert net_before.bytes_recv <= received <= net_after.bytes_recv
    assert net_before.bytes_sent <= sent <= net_after.bytes_sent

    vm, mem = host.psutil.virtual_memory(), procfs.memory(files)
    assert mem["total"] == vm.total
    for field in ("available", "free", "buffers", "cached"):
        assert mem[field] == pytest.approx(getattr(vm, field), rel=0.1, abs=2**20), field

    host.psutil.cpu_percent(None)
    total, idle = procfs.cpu_ticks(files)
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # one core busy
        pass
    busy_psutil = host.psutil.cpu_percent(None) / 100.0
    total_after, idle_after = procfs.cpu_ticks(files)  # the same file, read again
    assert 1 - (idle_after - idle) / (total_after - total) == pytest.approx(busy_psutil, abs=0.1)

    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ok"
        proc = host.psutil.Process(child.pid)
        cpu, rss = procfs.process_cpu_rss(files, child.pid)
        times = proc.cpu_times()
        assert cpu == pytest.approx(times.user + times.system, abs=0.05)
        assert rss == pytest.approx(proc.memory_info().rss, rel=0.05)
        assert rss > 150 * 2**20
    finally:
        child.kill()
        child.wait()
    with pytest.raises(OSError):
        procfs.process_cpu_rss(files, child.pid)  # reaped: the sampler skips it
    files.close()


def test_procfs_files_read_current_contents_and_close_what_is_gone(tmp_path: Path) -> None:
    files = procfs.Files()
    path = tmp_path / "figures"
    path.write_bytes(b"1 2 3\n")
    assert files.read(str(path)) == b"1 2 3\n"
    path.write_bytes(b"4 5\n")  # rewritten in place: the same open file, read from its start
    assert files.read(str(path)) == b"4 5\n"
    big = b"".join(b"line %d of a long file\n" % i for i in range(20_000))  # several reads' worth
    path.write_bytes(big)
    assert files.read(str(path)) == big

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stat = f"/proc/{child.pid}/stat"
    first = files.read(stat)
    assert first.startswith(b"%d (" % child.pid)
    time.sleep(0.05)
    child.kill()
    child.wait()
    with pytest.raises(OSError):
        files.read(stat)  # the process is gone: its kept file fails, and is closed
    assert stat not in files._fds

    def open_on_path() -> int:
        fds = os.listdir("/proc/self/fd")
        return sum(1 for fd in fds if _readlink(f"/proc/self/fd/{fd}") == str(path))

    files.read(str(path))
    files.prune()  # read since the last prune: kept
    assert open_on_path() == 1
    files.prune()  # not read since: closed
    assert files._fds == {} and open_on_path() == 0


def test_procfs_files_keep_at_most_so_many_open(tmp_path: Path) -> None:
    files = procfs.Files(keep=2)
    paths = [tmp_path / f"f{i}" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_bytes(b"%d" % i)
    assert [files.read(str(path)) for path in paths] == [b"0", b"1", b"2"]
    assert set(files._fds) == {str(paths[0]), str(paths[1])}  # the third was read and closed
    paths[2].write_bytes(b"two")
    assert files.read(str(paths[2])) == b"two"
    assert procfs.read_once(str(paths[2])) == b"two"
    files.close()


def _readlink(link: str) -> str | None:
    try:
        return os.readlink(link)
    except OSError:  # the listing's own descriptor, closed since
        return None


def test_host_sampler_keeps_proc_files_open_and_closes_them() -> None:
    sampler = SystemSampler(gpu=False)
    sampler.start()
    kept = dict(sampler.host._files._fds)
    assert {"/proc/stat", "/proc/meminfo", f"/proc/{os.getpid()}/stat"} <= kept.keys()
    snap = sampler.sample_now()
    assert _value(snap, "system.cpu.utilization") is not None
    assert sampler.host._files._fds == kept  # the same descriptors, read again
    sampler.stop()
    assert sampler.host._files._fds == {}


def test_process_tree_is_walked_once_per_refresh_period(monkeypatch: pytest.MonkeyPatch) -> None:
    walks = []
    walk = host.descendant_pids

    def counted(pid: int) -> list[int] | None:
        walks.append(1)
        return walk(pid)

    monkeypatch.setattr(host, "descendant_pids", counted)
    sampler = SystemSampler(gpu=False)
    for _ in range(3):
        sampler.sample_now()
    assert len(walks) == 1
    monkeypatch.setattr(host, "TREE_REFRESH_S", 0.0)
    sampler.sample_now()
    assert len(walks) == 2


def test_gpu_figures_from_nvml_with_semconv_names() -> None:
    gpu = GpuSampler(FakeNvml())
    gpu.start()
    samples = gpu.sample()
    util = [s for s in samples if s.name == "hw.gpu.utilization"]
    assert [(s.attributes["hw.id"], s.value) for s in util] == [("gpu0", 0.5), ("gpu1", 0.6)]
    assert (
        util[0].attributes["hw.vendor"] == "nvidia"
        and util[0].attributes["hw.name"] == "NVIDIA H100 80GB HBM3"
    )
    names = {s.name for s in samples}
    assert {
        "hw.gpu.memory.usage",
        "hw.gpu.memory.limit",
        "hw.gpu.memory.utilization",
        "hw.temperature",
        "hw.power",
        "hw.energy",
    } <= names
    power = next(s for s in samples if s.name == "hw.power")
    assert power.value == 300.0 and power.unit == "W"
    assert "hw.errors" not in names  # ECC not supported on this fake board: only that figure is dropped


def test_cuda_visible_devices_by_index_and_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    uuids = ["GPU-0aaa-bbbb", "GPU-1aaa-bbbb", "GPU-2aaa-bbbb"]
    assert visible_devices(None, 3, uuids) == [0, 1, 2]
    assert visible_devices("2,0", 3, uuids) == [2, 0]
    assert visible_devices("GPU-1aaa", 3, uuids) == [1]
    assert visible_devices("", 3, uuids) == []
    assert visible_devices("0,7,1", 3, uuids) == [0]  # CUDA stops at the first invalid entry
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1aaa-bbbb")
    gpu = GpuSampler(FakeNvml())
    gpu.start()
    assert [h[0] for h in gpu.handles] == ["gpu0"]
    assert next(s for s in gpu.sample() if s.name == "hw.gpu.utilization").value == 0.6


def test_unsupported_power_and_mid_run_failure() -> None:
    nvml = FakeNvml()
    gpu = GpuSampler(nvml)
    gpu.start()
    nvml.no_power = True
    assert "hw.power" not in {s.name for s in gpu.sample()}
    nvml.fail = True
    assert gpu.sample() == [] and gpu.sample() == []
    assert len(gpu.notes) == 1 and "NVML failed mid-run" in gpu.notes[0]


def test_no_gpu_visible_and_no_pynvml_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    gpu = GpuSampler(FakeNvml())
    gpu.start()
    assert gpu.notes == ["No GPU figures: no NVIDIA GPU visible to this job"]
    monkeypatch.setitem(sys.modules, "pynvml", None)
    absent = GpuSampler()
    absent.start()
    assert "NVML is not available" in absent.notes[0]


def test_sampler_thread_and_instruments() -> None:
    sampler = SystemSampler(interval_s=0.05, nvml=FakeNvml())
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    seen = []
    sampler.add_listener(seen.append)
    sampler.start()
    register_system_instruments(provider.get_meter("t"), sampler)
    time.sleep(0.3)
    t0 = time.monotonic()
    sampler.stop()
    assert time.monotonic() - t0 < 0.5 and len(seen) >= 3 and not sampler.errors
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert metrics["hw.gpu.utilization"].unit == "1" and metrics["system.disk.io"].unit == "By"
    assert len(metrics["hw.gpu.utilization"].data.data_points) == 2
    provider.shutdown()


def test_a_run_records_its_gpus_figures(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the whole pipeline (the instruments are made before the sampler's thread starts):
    NVML's GPUs are found in time for their instruments, and their series reach the store."""
    import traincard_otel

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    monkeypatch.setenv("TRAINCARD_SYSTEM", "true")
    monkeypatch.setenv("TRAINCARD_SYSTEM_INTERVAL", "0.1")
    reporter = traincard_otel.configure()
    for step in range(1, 4):
        reporter.metric("loss", 1.0 / step, step)
        time.sleep(0.15)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    util = {s.tags.get("hw.id"): s for s in run.system.values() if s.name == "hw.gpu.utilization"}
    assert set(util) == {"gpu0", "gpu1"} and util["gpu0"].values[-1] == 0.5


def test_no_gpu_instruments_without_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    sampler = SystemSampler(interval_s=60, nvml=FakeNvml())
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    sampler.start()
    register_system_instruments(provider.get_meter("t"), sampler)
    sampler.stop()
    data = reader.get_metrics_data()
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert "system.cpu.utilization" in names
    assert not [n for n in names if n.startswith(("hw.", "traincard.gpu."))]
    provider.shutdown()


def test_descendants_are_found_through_proc_as_psutil_finds_them() -> None:
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        parent = host.psutil.Process(child.pid)
        deadline = time.monotonic() + 10
        while not parent.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        (grandchild,) = parent.children()
        me = host.psutil.Process()
        expected = {p.pid for p in me.children(recursive=True)}  # other tests' children too
        assert {child.pid, grandchild.pid} <= expected
        assert set(host.descendant_pids(me.pid) or ()) == expected
        gone = subprocess.Popen([sys.executable, "-c", ""])
        gone.wait()
        assert host.child_pids(gone.pid) == []  # a child that exited mid-walk has no children
    finally:
        for p in host.psutil.Process(child.pid).children(recursive=True):
            p.kill()
        child.kill()
        child.wait()
