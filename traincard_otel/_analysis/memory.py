"""What a CUDA memory snapshot says at an out-of-memory error: the largest live allocations with
the Python frames that made them, what was allocated and reserved, and the allocation that failed.

Reads the dictionary ``torch.cuda.memory._snapshot()`` returns (documented in PyTorch's
``torch_cuda_memory`` notes): ``segments`` (each with ``total_size`` and ``blocks``: ``size``,
``requested_size``, ``state`` (``active_allocated``, ``active_awaiting_free``, ``inactive``) and
``frames`` (``filename``, ``line``, ``name``, innermost first)) and ``device_traces`` (per device,
entries with ``action`` (``alloc``, ``free_requested``, ``free_completed``, ``segment_alloc``,
``segment_free``, ``oom``, ``snapshot``), ``size``, ``device_free`` on ``oom``). Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from .._types import JsonObject, JsonValue

TOP: Final = 10  # largest live allocations listed
FRAMES: Final = 8  # Python frames kept per allocation, innermost first
# Frames inside these are PyTorch's own: an allocation is placed at the first frame outside them.
_LIBRARY: Final = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen ", "/lib/python3")


def _int(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _frames(block: Mapping[str, JsonValue]) -> list[JsonObject]:
    out = []
    for f in block.get("frames") or []:
        if isinstance(f, Mapping) and isinstance(f.get("filename"), str):
            out.append({"file": f["filename"], "line": _int(f.get("line")), "name": str(f.get("name", ""))})
    return out


def where(frames: Sequence[Mapping[str, JsonValue]]) -> str:
    """``file:line in name`` of the innermost frame outside PyTorch and installed packages (the code
    that asked for the memory), else of the innermost frame; empty without frames."""
    if not frames:
        return ""
    f = next((f for f in frames if not any(part in str(f["file"]) for part in _LIBRARY)), frames[0])
    return f"{f['file']}:{f['line']} in {f['name']}"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def oom_summary(snapshot: Mapping[str, JsonValue], peak_bytes: int | None = None) -> JsonObject:
    """The largest live allocations (size, requested size, frames, where), the bytes allocated and
    reserved, the peak (``peak_bytes`` as the allocator counted it, else the trace's highest), and
    the allocation that failed (its size and the free device memory then)."""
    segments = [s for s in snapshot.get("segments") or [] if isinstance(s, Mapping)]
    live = [
        b
        for s in segments
        for b in s.get("blocks") or []
        if isinstance(b, Mapping) and b.get("state") == "active_allocated"
    ]
    allocated = sum(_int(b.get("size")) for b in live)
    largest = []
    for b in sorted(live, key=lambda b: -_int(b.get("size")))[:TOP]:
        frames = _frames(b)
        largest.append(
            {
                "size": _int(b.get("size")),
                "requested": _int(b.get("requested_size")) or _int(b.get("size")),
                "where": where(frames),
                "frames": frames[:FRAMES],
            }
        )
    traces = [t for t in snapshot.get("device_traces") or [] if isinstance(t, list)]
    entries = [e for t in traces for e in t if isinstance(e, Mapping)]
    oom = next((e for e in reversed(entries) if e.get("action") == "oom"), None)
    return {
        "allocated": allocated,
        "reserved": sum(_int(s.get("total_size")) for s in segments),
        "peak": peak_bytes if peak_bytes is not None else _trace_peak(entries, allocated),
        "live_blocks": len(live),
        "largest": largest,
        "failed_alloc": _int(oom.get("size")) if oom is not None else None,
        "device_free": _int(oom.get("device_free")) if oom is not None else None,
    }


def _trace_peak(entries: Sequence[Mapping[str, JsonValue]], allocated_now: int) -> int:
    """The highest allocated total the trace passed through, walked back from ``allocated_now``."""
    net = 0
    deltas = []
    for e in entries:
        action, size = e.get("action"), _int(e.get("size"))
        delta = size if action == "alloc" else -size if action == "free_completed" else 0
        deltas.append(delta)
        net += delta
    level, peak = allocated_now - net, allocated_now
    for delta in deltas:
        level += delta
        peak = max(peak, level)
    return peak


def evidence(summary: Mapping[str, JsonValue], lines: int = 3) -> list[str]:
    """The summary as the failure verdict's evidence lines."""
    out = []
    failed = summary.get("failed_alloc")
    if isinstance(failed, int):
        free = summary.get("device_free")
        out.append(
            f"allocating {fmt_bytes(failed)} failed"
            + (f" with {fmt_bytes(free)} free on the device" if isinstance(free, int) else "")
        )
    out.append(
        f"at the OOM {fmt_bytes(_int(summary.get('allocated')))} allocated, "
        f"{fmt_bytes(_int(summary.get('reserved')))} reserved, peak {fmt_bytes(_int(summary.get('peak')))}"
    )
    for block in list(summary.get("largest") or [])[:lines]:
        place = block.get("where") or "an unknown place"
        out.append(f"live {fmt_bytes(_int(block.get('size')))} allocated at {place}")
    return out
