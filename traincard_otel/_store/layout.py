"""Object names inside a task's ``traincard/`` folder. Pure path logic, no I/O.

::

    a<attempt>/r<rank>/<writer>/seg-<seq>.jsonl   immutable, one per flush
    a<attempt>/r<rank>/<writer>/part-<first>-<last>.parquet   segments first..last, compacted
    a<attempt>/r<rank>/<writer>/state.json        replaced atomically at every flush
    summary/a<attempt>-r<rank>-<writer>.json      what the writer saw, for sweeps: replaced every 10 s
    summary.json                                  a task's summary as stores before writers kept
                                                  their own had it (still read)
    requests/ranks.json                           what the running ranks are asked (``traincard stacks``,
                                                  ``traincard profile``, a rank's own profile trigger)
    profiles/<id>/r<rank>.json                    one rank's summary of profile capture <id>
    profiles/<id>/r<rank>.trace.json.gz           ... and its Chrome trace (Perfetto opens it)

``writer`` is unique per process, so a rank restarted inside one attempt (torchrun elastic)
never overwrites what the previous process wrote. The summaries sit apart from the ``a*`` folders,
where the telemetry grows: one listing of a step, with ``/traincard/a`` as its delimiter, folds every
task's telemetry into one entry and names every summary (``_read/load/summaries.py``).
"""

from __future__ import annotations

import dataclasses
import re

STATE_NAME = "state.json"
SUMMARY_NAME = "summary.json"  # the task's summary in stores written before each writer kept its own
SUMMARY_PREFIX = "summary/"  # each writer's summary: summary/a<attempt>-r<rank>-<writer>.json
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


def summary_name(attempt: int, rank: int, writer: str) -> str:
    return f"{SUMMARY_PREFIX}a{attempt}-r{rank}-{writer}.json"


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


#: A @parallel gang's markers: ``gang.json`` in each node's store, and each node's entry in the
#: control task's ``gang/`` folder; torchrun's elastic agent records under ``elastic/``.
GANG_FILE = "gang.json"
NODE_PREFIX = "gang/node-"
ELASTIC_PREFIX = "elastic/"
