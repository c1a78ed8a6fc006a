"""A finished ``torch.profiler`` capture as the store keeps it: the gzip'd Chrome trace, cut to
``MAX_TRACE_BYTES`` when larger (the cut counted), its top operators and its breakdown. Runs on the
capture's own thread, never the training thread."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from typing import Final

from ..._analysis.profile import STEP_MARK, breakdown
from ..._types import Foreign, JsonObject

MAX_TRACE_BYTES: Final = 20 * 1024 * 1024  # gzip'd, per rank: Perfetto opens it in a browser tab
TOP_OPERATORS: Final = 15
_LEVEL = 6  # gzip level: traces are text of many repeated names, well compressed at 6


def _ts(event: JsonObject) -> float:
    ts = event.get("ts")
    return float(ts) if isinstance(ts, int | float) else 0.0


def _gzip(data: JsonObject) -> bytes:
    return gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=_LEVEL)


def fit(trace: JsonObject, limit: int = MAX_TRACE_BYTES) -> tuple[bytes, int, int]:
    """``trace`` gzip'd, its ``traceEvents`` cut to the earliest that fit in ``limit`` bytes
    (metadata events always kept): (bytes, events kept, events cut)."""
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        events = []
    whole = _gzip(trace)
    if len(whole) <= limit:
        return whole, len(events), 0
    meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    timed = sorted((e for e in events if isinstance(e, dict) and e.get("ph") != "M"), key=_ts)
    lo, hi, best = 0, len(timed), _gzip({**trace, "traceEvents": meta})
    while lo < hi:  # the most events whose trace still fits, by halving
        mid = (lo + hi + 1) // 2
        data = _gzip({**trace, "traceEvents": meta + timed[:mid], "traincard_cut_events": len(timed) - mid})
        if len(data) <= limit:
            lo, best = mid, data
        else:
            hi = mid - 1
    return best, len(meta) + lo, len(timed) - lo


def exported(prof: Foreign) -> JsonObject:
    """The capture's Chrome trace as ``export_chrome_trace`` writes it."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="traincard-trace-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as fh:
            trace: JsonObject = json.load(fh)
    finally:
        os.unlink(path)
    return trace


def top_operators(prof: Foreign, device: bool) -> JsonObject:
    """The operators with the most self time on the host and, on a GPU, on the device (ms)."""
    rows: list[JsonObject] = []
    for avg in prof.key_averages():
        if str(avg.key).startswith(STEP_MARK.rstrip("#")):  # the profiler's own step annotations
            continue
        rows.append(
            {
                "name": str(avg.key),
                "calls": int(avg.count),
                "self_cpu_ms": float(avg.self_cpu_time_total) / 1000,
                "cpu_total_ms": float(avg.cpu_time_total) / 1000,
                "self_device_ms": float(getattr(avg, "self_device_time_total", 0.0) or 0.0) / 1000,
            }
        )
    host = sorted(rows, key=lambda r: -r["self_cpu_ms"])[:TOP_OPERATORS]
    out: JsonObject = {"host": host, "host_total_ms": sum(r["self_cpu_ms"] for r in rows)}
    if device:
        out["device"] = [
            r for r in sorted(rows, key=lambda r: -r["self_device_ms"]) if r["self_device_ms"] > 0
        ][:TOP_OPERATORS]
        out["device_total_ms"] = sum(r["self_device_ms"] for r in rows)
    return out


def summarize(prof: Foreign, limit: int | None = None) -> tuple[bytes, JsonObject]:
    """(the gzip'd trace, at most ``limit`` bytes (``MAX_TRACE_BYTES``), and what the summary says
    of it: top operators, breakdown, trace size)."""
    limit = MAX_TRACE_BYTES if limit is None else limit
    trace = exported(prof)
    events = [e for e in trace.get("traceEvents") or [] if isinstance(e, dict)]
    found = breakdown(events)
    data, kept, cut = fit(trace, limit)
    summary: JsonObject = {
        "operators": top_operators(prof, found.device),
        "breakdown": {
            "device": found.device,
            "span_s": found.span_s,
            "seconds": found.seconds,
            "shares": found.shares,
            "overlap": found.overlap,
        },
        "trace_bytes": len(data),
        "trace_events": kept,
        "trace_events_cut": cut,
    }
    return data, summary
