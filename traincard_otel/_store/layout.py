"""Object names inside a task's ``traincard/`` folder. Pure path logic, no I/O.

::

    a<attempt>/r<rank>/<writer>/seg-<seq>.jsonl   immutable, one per flush
    a<attempt>/r<rank>/<writer>/part-<first>-<last>.parquet   segments first..last, compacted
    a<attempt>/r<rank>/<writer>/state.json        replaced atomically at every flush
    summary.json                                  the task's summary (sweeps), replaced now and then
    requests/ranks.json                           what the running ranks are asked (``traincard stacks``,
                                                  ``traincard profile``, a rank's own profile trigger)
    profiles/<id>/r<rank>.json                    one rank's summary of profile capture <id>
    profiles/<id>/r<rank>.trace.json.gz           ... and its Chrome trace (Perfetto opens it)

``writer`` is unique per process, so a rank restarted inside one attempt (torchrun elastic)
never overwrites what the previous process wrote.
"""

from __future__ import annotations

import dataclasses
import re

STATE_NAME = "state.json"
SUMMARY_NAME = "summary.json"  # beside the attempt folders: the task's summary for comparisons
# {"stacks": {"id", "time"}, "profile": {"id", "time", "steps", "ranks", ...}}: each entry is
# answered once by every running rank it names; one object, so a rank's poll is one read
REQUESTS = "requests/ranks.json"
_SEGMENT = re.compile(r"^a(\d+)/r(\d+)/([A-Za-z0-9_-]+)/seg-(\d{8})\.jsonl$")
_STATE = re.compile(r"^a(\d+)/r(\d+)/([A-Za-z0-9_-]+)/state\.json$")
_PART = re.compile(r"^a(\d+)/r(\d+)/([A-Za-z0-9_-]+)/part-(\d{8})-(\d{8})\.parquet$")
_PROFILE = re.compile(r"^profiles/([A-Za-z0-9_-]+)/r(\d+)\.json$")


@dataclasses.dataclass(frozen=True, order=True)
class ObjectName:
    attempt: int
    rank: int
    writer: str
    kind: str  # "segment" | "part" | "state" | "profile" (writer: the capture's id; attempt: 0)
    seq: int = 0  # a part: its first segment
    last: int = 0  # a part: its last segment


def writer_dir(attempt: int, rank: int, writer: str) -> str:
    return f"a{attempt}/r{rank}/{writer}"


def segment_name(attempt: int, rank: int, writer: str, seq: int) -> str:
    return f"{writer_dir(attempt, rank, writer)}/seg-{seq:08d}.jsonl"


def part_name(attempt: int, rank: int, writer: str, first: int, last: int) -> str:
    return f"{writer_dir(attempt, rank, writer)}/part-{first:08d}-{last:08d}.parquet"


def state_name(attempt: int, rank: int, writer: str) -> str:
    return f"{writer_dir(attempt, rank, writer)}/{STATE_NAME}"


def profile_name(capture: str, rank: int) -> str:
    """A rank's summary of profile capture ``capture``."""
    return f"profiles/{capture}/r{rank}.json"


def trace_name(capture: str, rank: int) -> str:
    """A rank's Chrome trace of profile capture ``capture`` (gzip'd JSON)."""
    return f"profiles/{capture}/r{rank}.trace.json.gz"


def parse(path: str) -> ObjectName | None:
    """Parse a relative object name; ``None`` for anything that is not ours (temp files...)."""
    if m := _SEGMENT.match(path):
        return ObjectName(int(m[1]), int(m[2]), m[3], "segment", int(m[4]))
    if m := _PART.match(path):
        return ObjectName(int(m[1]), int(m[2]), m[3], "part", int(m[4]), int(m[5]))
    if m := _STATE.match(path):
        return ObjectName(int(m[1]), int(m[2]), m[3], "state")
    if m := _PROFILE.match(path):
        return ObjectName(0, int(m[2]), m[1], "profile")
    return None
