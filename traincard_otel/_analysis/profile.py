"""Where a profile capture's time went, from its Chrome trace: the breakdown Holistic Trace
Analysis gives per rank, computed here on the trace's events (pure, no I/O).

On a GPU (the trace has device kernels): the span from the first kernel's start to the last one's
end is split into computation (the union of computation kernels), communication (NCCL/RCCL/HCCL
kernels not under computation), memory copies (memcpy/memset not under either) and idle (no kernel
at all); the share of communication hidden under computation is ``|C ∩ M| / |M|``. Kernels are
classified by name as HTA does (``hta/common/types.py``).

On a CPU: the profiled steps' span (their ``ProfilerStep#`` annotations) on the training thread is
split into communication (collectives' ops: ``c10d::``, ``gloo:``, ``record_param_comms`` ...),
computation (the thread's other operators) and other (Python, the framework, waiting). Gloo works
on threads of its own, which the profiler does not record, so no overlap is known there.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

from .._types import JsonObject

Interval = tuple[float, float]

DEVICE_CATEGORIES: Final = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_DEVICE_COMMUNICATION = re.compile(r"^nccl|ncclKernel|ncclDevKernel|^hip.*rccl|^hccl", re.I)
_DEVICE_MEMORY = re.compile(r"^(hip)?mem(cpy|set)|^dma", re.I)
_HOST_COMMUNICATION = re.compile(
    r"^(c10d::|gloo:|nccl:|record_param_comms)|all_?reduce|all_?gather|reduce_scatter|broadcast|barrier|all_?to_?all",
    re.I,
)
STEP_MARK: Final = "ProfilerStep#"


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """The profiled span of one rank, in seconds per part and as shares of it."""

    device: bool  # from device kernels (a GPU), else from the training thread's host operators
    span_s: float
    seconds: dict[str, float]  # device: computation, communication, memory, idle; host: computation,
    # communication, other
    overlap: float | None  # share of communication hidden under computation (device only)

    @property
    def shares(self) -> dict[str, float]:
        return {k: (v / self.span_s if self.span_s > 0 else 0.0) for k, v in self.seconds.items()}


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged: sorted, none overlapping."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def length(merged: Sequence[Interval]) -> float:
    return sum(end - start for start, end in merged)


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The intersection of two merged interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _interval(e: JsonObject) -> Interval | None:
    ts, dur = e.get("ts"), e.get("dur")
    if not isinstance(ts, int | float) or not isinstance(dur, int | float) or dur < 0:
        return None
    return float(ts) / 1e6, (float(ts) + float(dur)) / 1e6


def _device(kernels: list[JsonObject]) -> Breakdown:
    compute, comm, memory = [], [], []
    for e in kernels:
        span = _interval(e)
        if span is None:
            continue
        name = str(e.get("name", ""))
        if e.get("cat") == "kernel" and _DEVICE_COMMUNICATION.search(name):
            comm.append(span)
        elif e.get("cat") != "kernel" or _DEVICE_MEMORY.search(name):
            memory.append(span)
        else:
            compute.append(span)
    c, m, mem = union(compute), union(comm), union(memory)
    every = union([*c, *m, *mem])
    if not every:
        return Breakdown(
            True, 0.0, {"computation": 0.0, "communication": 0.0, "memory": 0.0, "idle": 0.0}, None
        )
    span_s = every[-1][1] - every[0][0]
    c_or_m = union([*c, *m])
    seconds = {
        "computation": length(c),
        "communication": length(c_or_m) - length(c),
        "memory": length(every) - length(c_or_m),
        "idle": span_s - length(every),
    }
    overlap = length(intersect(c, m)) / length(m) if m else None
    return Breakdown(True, span_s, seconds, overlap)


def _host(events: list[JsonObject]) -> Breakdown:
    steps = [e for e in events if str(e.get("name", "")).startswith(STEP_MARK) and e.get("ph") == "X"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    if steps:
        tid = Counter(e.get("tid") for e in steps).most_common(1)[0][0]
    else:
        tid = Counter(e.get("tid") for e in ops).most_common(1)[0][0] if ops else None
    ops = [e for e in ops if e.get("tid") == tid]
    window = union(s for e in steps if (s := _interval(e)) is not None) or union(
        s for e in ops if (s := _interval(e)) is not None
    )
    if not window:
        return Breakdown(False, 0.0, {"computation": 0.0, "communication": 0.0, "other": 0.0}, None)
    comm_ops = [s for e in ops if _HOST_COMMUNICATION.search(str(e.get("name", ""))) and (s := _interval(e))]
    all_ops = [s for e in ops if (s := _interval(e)) is not None]
    comm = intersect(union(comm_ops), window)
    busy = intersect(union(all_ops), window)
    span = length(window)
    seconds = {
        "computation": length(busy) - length(intersect(busy, comm)),
        "communication": length(comm),
        "other": span - length(union([*busy, *comm])),
    }
    return Breakdown(False, span, seconds, None)


def breakdown(events: Sequence[JsonObject]) -> Breakdown:
    """The breakdown of a trace's ``traceEvents``: from device kernels where it has any."""
    kernels = [e for e in events if e.get("cat") in DEVICE_CATEGORIES and e.get("ph") == "X"]
    return _device(kernels) if kernels else _host(list(events))
