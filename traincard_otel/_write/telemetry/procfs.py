"""Linux ``/proc`` readers for the host figures: CPU, memory, disk, network, processes.

psutil parses the same files through general-purpose machinery (a table per disk and per network
interface, wrap-around tracking, named tuples, every field of every file): about 0.55 ms for the
figures of one sample on a 2-vCPU machine, against 0.18 ms here, and several times both inside a
training step's cold caches. The system sampler runs on a thread that competes with training for
the GIL, so what it spends in Python the training thread waits for.

:func:`available` says whether these files can be read; where they cannot (not Linux, a restricted
``/proc``), the sampler uses psutil instead.

Each reader takes a :class:`Files`, which keeps the files open and reads each in one ``pread``:
Python's ``open(path).read()`` makes about eight system calls (open, two ``fstat``, ``ioctl``,
``lseek``, two reads, close), and each releases the GIL, which the sampler then has to take back
from the training thread. Keeping a ``/proc`` file open and re-reading it from offset 0 gives its
current contents, as ``top`` does with ``/proc/stat``.
"""

from __future__ import annotations

import os
import re

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own sector size
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_READ_BYTES = 65536
_MEMINFO = re.compile(rb"^(MemTotal|MemAvailable|MemFree|Buffers|Cached|SReclaimable):\s+(\d+)", re.MULTILINE)


class Files:
    """Files kept open and read whole from their start, one system call each where they fit in
    64 KiB; :meth:`prune` closes those no longer read (processes that are gone).

    At most ``keep`` files stay open: the training process's own descriptors come first (a
    DataLoader sharing tensors through file descriptors can run out of them), so past that a
    file is opened, read and closed each time (:func:`read_once`).
    """

    def __init__(self, keep: int = 32) -> None:
        self.keep = keep
        self._fds: dict[str, int] = {}
        self._read: set[str] = set()

    def read(self, path: str) -> bytes:
        """The file's current contents; OSError if it cannot be opened or read (its process has
        exited, say), and the file is then closed."""
        fd = self._fds.get(path)
        if fd is None:
            if len(self._fds) >= self.keep:
                return read_once(path)
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._read.add(path)
        try:
            return _read_whole(fd)
        except OSError:
            self._close(path)
            raise

    def prune(self) -> None:
        """Close the files not read since the last call."""
        for path in self._fds.keys() - self._read:
            self._close(path)
        self._read = set()

    def close(self) -> None:
        for path in list(self._fds):
            self._close(path)

    def _close(self, path: str) -> None:
        self._read.discard(path)
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)


def read_once(path: str) -> bytes:
    """The file's contents, opened and closed again (for files read only now and then)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _read_whole(fd)
    finally:
        os.close(fd)


def _read_whole(fd: int) -> bytes:
    data = os.pread(fd, _READ_BYTES, 0)
    # A /proc read stops short of the buffer at the end, or where the next line would not fit:
    # only a read that nearly fills it may have more behind.
    while len(data) > _READ_BYTES // 2:
        more = os.pread(fd, _READ_BYTES, len(data))
        if not more:
            break
        data += more
    return data


def available() -> bool:
    """Whether every reader here works on this host."""
    files = Files()
    try:
        disks = whole_disks()
        disk_bytes(files, disks)
        network_bytes(files)
        process_cpu_rss(files, os.getpid())
        cpu_ticks(files)
        memory(files)
    except (OSError, ValueError, IndexError, KeyError):
        return False
    finally:
        files.close()
    return True


def cpu_ticks(files: Files) -> tuple[int, int]:
    """Clock ticks since boot over all CPUs: in total, and idle (waiting for I/O included)."""
    first_line = files.read("/proc/stat").partition(b"\n")[0]
    fields = [int(v) for v in first_line.split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is counted in
    # user and nice already, as psutil also takes it.
    return sum(fields[:8]), fields[3] + fields[4]


def memory(files: Files) -> dict[str, int]:
    """Bytes of memory: ``total``, ``available``, ``free``, ``buffers`` and ``cached`` (the page
    cache with reclaimable slab, as psutil counts it)."""
    kib = {name: int(value) for name, value in _MEMINFO.findall(files.read("/proc/meminfo"))}
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


def disk_bytes(files: Files, disks: frozenset[bytes]) -> tuple[int, int]:
    """Bytes read and written since boot on the devices named in ``disks``."""
    read = written = 0
    for line in files.read("/proc/diskstats").splitlines():
        fields = line.split()
        if len(fields) > 9 and fields[2] in disks:
            read += int(fields[5])
            written += int(fields[9])
    return read * SECTOR_BYTES, written * SECTOR_BYTES


def network_bytes(files: Files) -> tuple[int, int]:
    """Bytes received and sent since boot, all interfaces (loopback included, as in psutil)."""
    received = sent = 0
    for line in files.read("/proc/net/dev").splitlines()[2:]:  # two header lines
        _name, colon, counters = line.partition(b":")
        if colon:
            fields = counters.split()
            received += int(fields[0])
            sent += int(fields[8])
    return received, sent


def process_cpu_rss(files: Files, pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and resident bytes of process ``pid``; OSError once it has exited."""
    # The command name (field 2) may hold spaces and parentheses: fields count from the last ")".
    after_name = files.read(f"/proc/{pid}/stat").rpartition(b")")[2].split()
    resident_pages = int(files.read(f"/proc/{pid}/statm").split()[1])
    return (int(after_name[11]) + int(after_name[12])) / _CLOCK_TICKS, resident_pages * _PAGE_BYTES
