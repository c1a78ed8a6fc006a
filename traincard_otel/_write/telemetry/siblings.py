"""How the other ranks of this node ended: the exit status a launcher knows and seldom writes down.

A rank killed by SIGKILL writes nothing. Its launcher (torchrun's agent, ``accelerate launch``,
``srun``'s step daemon) learns its exit status when it reaps it, and at best prints it. So every
rank watches the other ranks that its parent started (its siblings) and reads the status the
kernel keeps for a process that has ended and is not reaped yet: ``pidfd_open`` turns a sibling's
end into a readable descriptor (no polling), and the ``exit_code`` field of ``/proc/<pid>/stat``
holds its status until the launcher reaps it (torchrun's agent looks every 0.1 s; this thread
wakes at once). What it reads goes into this rank's state, and the reader names the first
failure with its signal under any launcher. Where pidfds are missing, or the launcher reaped
first, the end is still recorded with its time, without a status.

Siblings are found from the parent's children (``/proc/<ppid>/task/<ppid>/children``) whose
environment gives a rank of the same launch (:func:`traincard_otel._identity.launched_rank`).
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Callable

from ..._identity import RankIdentity, launch_id, launched_rank
from ..._safety import internal_error
from ..._types import JsonObject

DISCOVER_EVERY_S = 5.0
DISCOVER_FOR_S = 60.0  # without the node's rank count, siblings are looked for this long
_EXIT_CODE_FIELD = 49  # /proc/<pid>/stat field 52, counted after the command's closing paren


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def exit_status(pid: int) -> int | None:
    """The wait status of ``pid`` if it has ended and is not reaped yet (a zombie), else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "Z" or len(fields) <= _EXIT_CODE_FIELD:
        return None
    return int(fields[_EXIT_CODE_FIELD])


def describe(status: int | None) -> tuple[int | None, str | None]:
    """(exit code, signal name) from a wait status; a signal gives the negative code torch uses."""
    if status is None:
        return None, None
    if status & 0x7F:
        num = status & 0x7F
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = f"signal {num}"
        return -num, name
    return (status >> 8) & 0xFF, None


class SiblingWatch:
    """Watches the siblings of this rank on a daemon thread; ``on_end(record)`` for each that ends.

    A record: ``rank``, ``local_rank``, ``pid``, ``time`` (when it was seen to end), ``exitcode``
    and ``signal`` (None where the status could not be read).
    """

    def __init__(self, me: RankIdentity, on_end: Callable[[JsonObject], None]) -> None:
        self.me, self._on_end = me, on_end
        self._launch = launch_id()
        self._watched: dict[int, tuple[int, RankIdentity]] = {}  # pidfd -> (pid, its rank)
        self._seen: set[int] = set()
        self._started = time.monotonic()
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="traincard-siblings", daemon=True)

    @staticmethod
    def available() -> bool:
        return hasattr(os, "pidfd_open") and os.path.isdir("/proc")

    def start(self) -> SiblingWatch:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 1.0) -> None:
        if self._stop_w < 0:
            return
        os.write(self._stop_w, b"x")
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if not self._thread.is_alive():  # else the thread still selects on it: left open
            os.close(self._stop_r)
            os.close(self._stop_w)
            self._stop_r = self._stop_w = -1

    def _wanted(self) -> bool:
        if self.me.local_world_size is not None:
            return len(self._seen) < self.me.local_world_size - 1
        return time.monotonic() - self._started < DISCOVER_FOR_S

    def discover(self) -> None:
        """Open a pidfd on each sibling not watched yet."""
        for pid in _children(os.getppid()):
            if pid == os.getpid() or pid in self._seen:
                continue
            env = _environ(pid)
            rank = launched_rank(env) if env else None
            if rank is None or rank.rank == self.me.rank or launch_id(env) != self._launch:
                continue
            if rank.world_size != self.me.world_size:
                continue
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            self._seen.add(pid)
            self._watched[fd] = (pid, rank)

    def _ended(self, fd: int) -> None:
        pid, rank = self._watched.pop(fd)
        code, name = describe(exit_status(pid))
        os.close(fd)
        self._on_end(
            {
                "rank": rank.rank,
                "local_rank": rank.local_rank,
                "pid": pid,
                "time": time.time(),
                "exitcode": code,
                "signal": name,
            }
        )

    def _run(self) -> None:
        try:
            next_look = 0.0
            while True:
                if self._wanted() and time.monotonic() >= next_look:
                    self.discover()
                    next_look = time.monotonic() + DISCOVER_EVERY_S
                if not self._watched and not self._wanted():
                    return  # nothing to watch, nothing more to find
                ready, _w, _x = select.select([self._stop_r, *self._watched], [], [], DISCOVER_EVERY_S)
                for fd in ready:  # first: a sibling's end is often what stops this rank
                    if fd != self._stop_r:
                        self._ended(fd)
                if self._stop_r in ready:
                    return
        except Exception as exc:
            internal_error("sibling watch", exc)
        finally:
            for fd in self._watched:
                os.close(fd)
            self._watched.clear()
