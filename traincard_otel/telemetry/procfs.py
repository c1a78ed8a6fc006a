"""Linux ``/proc`` readers for the host figures: CPU, memory, disk, network, processes.

psutil parses the same files through general-purpose machinery (a table per disk and per network
interface, wrap-around tracking, named tuples, every field of every file): about 0.55 ms for the
figures of one sample on a 2-vCPU machine, against 0.18 ms here, and several times both inside a
training step's cold caches. The system sampler runs on a thread that competes with training for
the GIL, so what it spends in Python the training thread waits for.

:func:`available` says whether these files can be read; where they cannot (not Linux, a restricted
``/proc``), the sampler uses psutil instead.
"""

from __future__ import annotations

import os
import re

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own sector size
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MEMINFO = re.compile(rb"^(MemTotal|MemAvailable|MemFree|Buffers|Cached|SReclaimable):\s+(\d+)", re.MULTILINE)


def available() -> bool:
    """Whether every reader here works on this host."""
    try:
        disks = whole_disks()
        disk_bytes(disks)
        network_bytes()
        process_cpu_rss(os.getpid())
        cpu_ticks()
        memory()
    except (OSError, ValueError, IndexError, KeyError):
        return False
    return True


def cpu_ticks() -> tuple[int, int]:
    """Clock ticks since boot over all CPUs: in total, and idle (waiting for I/O included)."""
    with open("/proc/stat", "rb") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is counted in
    # user and nice already, as psutil also takes it.
    return sum(fields[:8]), fields[3] + fields[4]


def memory() -> dict[str, int]:
    """Bytes of memory: ``total``, ``available``, ``free``, ``buffers`` and ``cached`` (the page
    cache with reclaimable slab, as psutil counts it)."""
    with open("/proc/meminfo", "rb") as f:
        kib = {name: int(value) for name, value in _MEMINFO.findall(f.read())}
    return {
        "total": kib[b"MemTotal"] * 1024,
        "available": kib[b"MemAvailable"] * 1024,
        "free": kib[b"MemFree"] * 1024,
        "buffers": kib[b"Buffers"] * 1024,
        "cached": (kib[b"Cached"] + kib.get(b"SReclaimable", 0)) * 1024,
    }


def whole_disks() -> frozenset[bytes]:
    """Names of the block devices (``/sys/block``): disks, not partitions, as psutil counts them,
    so that a partition's bytes are not counted twice."""
    return frozenset(name.encode() for name in os.listdir("/sys/block"))


def disk_bytes(disks: frozenset[bytes]) -> tuple[int, int]:
    """Bytes read and written since boot on the devices named in ``disks``."""
    with open("/proc/diskstats", "rb") as f:
        lines = f.read().splitlines()
    read = written = 0
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[2] in disks:
            read += int(fields[5])
            written += int(fields[9])
    return read * SECTOR_BYTES, written * SECTOR_BYTES


def network_bytes() -> tuple[int, int]:
    """Bytes received and sent since boot, all interfaces (loopback included, as in psutil)."""
    with open("/proc/net/dev", "rb") as f:
        lines = f.read().splitlines()[2:]  # two header lines
    received = sent = 0
    for line in lines:
        _name, colon, counters = line.partition(b":")
        if colon:
            fields = counters.split()
            received += int(fields[0])
            sent += int(fields[8])
    return received, sent


def process_cpu_rss(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and resident bytes of process ``pid``; OSError once it has exited."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        # The command name (field 2) may hold spaces and parentheses: fields count from the last ")".
        after_name = f.read().rpartition(b")")[2].split()
    with open(f"/proc/{pid}/statm", "rb") as f:
        resident_pages = int(f.read().split()[1])
    return (int(after_name[11]) + int(after_name[12])) / _CLOCK_TICKS, resident_pages * _PAGE_BYTES
