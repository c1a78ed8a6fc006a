"""Host and process figures, under the OTel system/process semantic conventions.

Read from ``/proc`` (:mod:`.procfs`) on Linux, through psutil elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import psutil

from ..._schema import Attr, SystemMetric
from . import procfs
from ._samples import Sample, sample

# The tree of a training process (DataLoader workers, compile workers) rarely changes: walk it at
# most this often and reuse the list in between (children that exit are skipped, new ones join at
# the next walk).
TREE_REFRESH_S = 10.0


def child_pids(pid: int) -> list[int] | None:
    """The direct children of ``pid``, from ``/proc/<pid>/task/*/children`` (Linux 3.5+).

    None where that file does not exist: psutil then finds children by reading the parent of every
    process on the host, about 1.7 ms with 65 processes on a 2-vCPU machine, and more on a busy
    host, against a few tens of µs here.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:  # exited since its parent listed it, or no /proc at all
        return [] if os.path.isdir("/proc/self/task") else None
    except OSError:
        return None
    out: list[int] = []
    for tid in tids:
        try:
            # Read once per walk, and a process may have hundreds of threads: not kept open.
            out.extend(int(c) for c in procfs.read_once(f"/proc/{pid}/task/{tid}/children").split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread exited
            return None  # the kernel does not list children
        except OSError:
            continue
    return out


def descendant_pids(pid: int) -> list[int] | None:
    """Every process below ``pid``, children before grandchildren; None as for :func:`child_pids`."""
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = child_pids(todo.pop())
        if kids is None:
            return None
        found += kids
        todo += kids
    return found


def cgroup_memory_limit() -> int | None:
    """The container's memory limit (cgroup v2, then v1), if one is set."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:
            return int(raw)
    return None


class HostSampler:
    """Reads CPU, memory, disk and network counters of the host, and this process tree's CPU and RSS.

    Read from :mod:`.procfs` where ``/proc`` can be read, else through psutil.
    """

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid or os.getpid()
        self.procfs = procfs.available()
        self._files = procfs.Files()  # /proc files kept open between samples
        self._cpus = psutil.cpu_count() or 1  # read from /sys at every call
        # Utilization is measured between samples: prime it so that the first sample is real.
        self._ticks = procfs.cpu_ticks(self._files) if self.procfs else (0, 0)
        if not self.procfs:
            psutil.cpu_percent(None)
        self._disks: frozenset[bytes] = frozenset()
        self._processes: dict[int, psutil.Process] = {}  # psutil's path only
        self._cpu_times: dict[int, float] = {}
        self._last_wall: float | None = None
        self._limit = cgroup_memory_limit()
        self._tree: list[int] = [self.pid]
        self._tree_at: float | None = None

    def _refresh(self, now: float) -> None:
        """Re-read what rarely changes: the process tree and, for procfs, the list of disks."""
        if self._tree_at is None or now - self._tree_at >= TREE_REFRESH_S or now < self._tree_at:
            self._files.prune()  # those of processes gone since the last walk
            self._tree = [self.pid, *self._descendants()]
            self._tree_at = now
            if self.procfs:
                self._disks = procfs.whole_disks()
            else:
                self._processes = {pid: p for pid, p in self._processes.items() if pid in self._tree}

    def _descendants(self) -> list[int]:
        pids = descendant_pids(self.pid)
        if pids is not None:
            return pids
        try:
            return [p.pid for p in psutil.Process(self.pid).children(recursive=True)]
        except psutil.Error:
            return []

    def _cpu_rss(self, pid: int) -> tuple[float, int]:
        """CPU seconds and RSS of ``pid``; raises OSError or psutil.Error once it has exited."""
        if self.procfs:
            return procfs.process_cpu_rss(self._files, pid)
        proc = self._processes.get(pid)
        if proc is None:  # a new Process object costs ~0.1 ms: keep them
            proc = self._processes[pid] = psutil.Process(pid)
        with proc.oneshot():
            times = proc.cpu_times()
            return times.user + times.system, proc.memory_info().rss

    def _process_figures(self, now: float) -> tuple[float | None, int]:
        """CPU utilization (cores busy / cores) and RSS of this process and its children."""
        cpu_total, rss, seen = 0.0, 0, {}
        for pid in self._tree:
            try:
                t, resident = self._cpu_rss(pid)
            except (OSError, psutil.Error):
                continue  # a DataLoader worker that just exited
            rss += resident
            seen[pid] = t
            cpu_total += t - self._cpu_times.get(pid, t)
        util = None
        if self._last_wall is not None and now > self._last_wall:
            util = max(0.0, cpu_total / (now - self._last_wall) / self._cpus)
        self._cpu_times, self._last_wall = seen, now
        return util, rss

    def _disk_net(self) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """(read, written) disk bytes and (received, sent) network bytes since boot."""
        if self.procfs:
            return procfs.disk_bytes(self._files, self._disks), procfs.network_bytes(self._files)
        disk, net = psutil.disk_io_counters(), psutil.net_io_counters()
        return (
            None if disk is None else (disk.read_bytes, disk.write_bytes),
            None if net is None else (net.bytes_recv, net.bytes_sent),
        )

    def _cpu_memory(self) -> tuple[float, Mapping[str, int | None]]:
        """Host CPU utilization since the last call (0-1), and memory figures in bytes."""
        if not self.procfs:
            vm = psutil.virtual_memory()
            fields = {k: getattr(vm, k, None) for k in ("total", "available", "free", "buffers", "cached")}
            return psutil.cpu_percent(None) / 100.0, fields
        total, idle = procfs.cpu_ticks(self._files)
        elapsed = total - self._ticks[0]
        busy = 1.0 - (idle - self._ticks[1]) / elapsed if elapsed > 0 else 0.0
        self._ticks = (total, idle)
        return busy, procfs.memory(self._files)

    def close(self) -> None:
        """Close the ``/proc`` files kept open; a later sample opens them again."""
        self._files.close()

    def sample(self, now: float) -> list[Sample]:
        self._refresh(now)
        cpu, mem = self._cpu_memory()
        out: list[Sample] = [sample(SystemMetric.CPU_UTILIZATION, cpu)]
        total, available = mem["total"] or 0, mem["available"] or 0
        limit = min(total, self._limit) if self._limit else total
        used = total - available
        for state, value in (
            ("used", used),
            ("free", mem["free"]),
            ("cached", mem["cached"]),
            ("buffers", mem["buffers"]),
        ):
            if value is not None:
                out.append(sample(SystemMetric.MEMORY_USAGE, float(value), {Attr.MEMORY_STATE: state}))
        if total:
            out.append(sample(SystemMetric.MEMORY_UTILIZATION, used / total, {Attr.MEMORY_STATE: "used"}))
        out.append(sample(SystemMetric.MEMORY_LIMIT, float(limit)))
        disk, net = self._disk_net()
        if disk is not None:
            for direction, value in zip(("read", "write"), disk, strict=True):
                out.append(sample(SystemMetric.DISK_IO, float(value), {Attr.DISK_IO_DIRECTION: direction}))
        if net is not None:
            for direction, value in zip(("receive", "transmit"), net, strict=True):
                out.append(
                    sample(SystemMetric.NETWORK_IO, float(value), {Attr.NETWORK_IO_DIRECTION: direction})
                )
        util, rss = self._process_figures(now)
        if util is not None:
            out.append(sample(SystemMetric.PROCESS_CPU_UTILIZATION, util))
        out.append(sample(SystemMetric.PROCESS_MEMORY_USAGE, float(rss)))
        return out
