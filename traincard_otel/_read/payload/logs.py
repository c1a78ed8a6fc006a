"""The log panel: the tail of the log, plus the latest error and warning lines (bounded), so a
store of a million lines still makes a small payload; what was left out is counted."""

from __future__ import annotations

from ..._data.rundata import RunData
from ..._schema import Attr
from ..._types import JsonObject
from .contract import LogInfoSection, LogRow
from .series import Mode

LOG_TAIL = 300  # lines of the tail in a full render
IMPORTANT_MAX = 100  # error lines, and as many warning lines, kept besides the tail (newest)
LIVE_IMPORTANT_MAX = 10
WARNING = 30
ERROR = 40
LEVELS = {
    "TRACE": 5,
    "DEBUG": 10,
    "INFO": 20,
    "NOTICE": 25,
    "WARN": 30,
    "WARNING": 30,
    "ERROR": 40,
    "CRITICAL": 50,
    "FATAL": 50,
}
_QUIET = frozenset(k for k, v in LEVELS.items() if v < WARNING)
_TRACEBACK = "Traceback (most recent call last):"

Record = JsonObject

# id(list) -> (the list, length scanned, indices of error / warning lines (newest), ranks)
_scan_cache: dict[int, tuple[list[Record], int, list[int], list[int], set[int]]] = {}


def level_number(level: object) -> int:
    """Severity of a level name (unknown names count as INFO)."""
    return LEVELS.get(str(level).upper(), 20)


def _rank(record: Record) -> int:
    attrs = record.get("attributes") or {}
    rank = attrs.get(Attr.RANK)
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else int(record.get("rank") or 0)


def _scan(logs: list[Record]) -> tuple[list[int], list[int], set[int]]:
    """Indices of the newest error and warning lines, and every rank seen, scanned incrementally
    (the reader only appends, so each refresh reads only the new lines)."""
    cached = _scan_cache.get(id(logs))
    if cached and cached[0] is logs and cached[1] <= len(logs):
        start, errors, warnings, ranks = cached[1], cached[2], cached[3], cached[4]
    else:
        start, errors, warnings, ranks = 0, [], [], set()
    quiet = _QUIET  # the common levels, checked without a function call per line
    rank_key = Attr.RANK
    for i in range(start, len(logs)):
        rec = logs[i]
        name = rec.get("level")
        if name not in quiet:
            level = level_number(name)
            if level >= WARNING:
                (errors if level >= ERROR else warnings).append(i)
        attrs = rec.get("attributes")
        rank = attrs.get(rank_key) if attrs else None
        ranks.add(rank if type(rank) is int else _rank(rec))
    for found in (errors, warnings):
        if len(found) > 2 * IMPORTANT_MAX:
            del found[:-IMPORTANT_MAX]
    if len(_scan_cache) > 64:
        _scan_cache.clear()
    _scan_cache[id(logs)] = (logs, len(logs), errors, warnings, ranks)
    return errors[-IMPORTANT_MAX:], warnings[-IMPORTANT_MAX:], ranks


def _line(r: Record) -> LogRow:
    message, traceback = str(r.get("message", "")), r.get("traceback")
    if not traceback and _TRACEBACK in message:  # printed tracebacks collapse like logged ones
        head, _sep, rest = message.partition(_TRACEBACK)
        last = rest.rstrip().rsplit("\n", 1)[-1].strip()
        message, traceback = (head.strip() or last or "Traceback"), _TRACEBACK + rest
    attrs = r.get("attributes") or {}
    stream = attrs.get(Attr.LOG_STREAM)
    out: LogRow = {
        "time": r["time"],
        "level": r["level"],
        "rank": _rank(r),
        "message": message,
        "traceback": traceback,
    }
    if isinstance(stream, str):
        out["stream"] = stream
    return out


def log_lines(data: RunData, mode: Mode) -> tuple[list[LogRow], LogInfoSection]:
    """(lines, info): the tail and the latest warning/error lines by time; info counts the rest."""
    records = data.logs
    n = mode.log_tail if mode.live else LOG_TAIL
    errors, warnings, ranks = _scan(records)
    keep = LIVE_IMPORTANT_MAX if mode.live else IMPORTANT_MAX
    important = errors[-keep:] + warnings[-keep:]
    first_tail = max(0, len(records) - 4 * n)
    tail_idx = sorted(range(first_tail, len(records)), key=lambda i: records[i]["time"])[-n:]
    chosen = set(tail_idx).union(important)
    lines = sorted((records[i] for i in chosen), key=lambda r: r["time"])
    info: LogInfoSection = {
        "total": len(records),
        "shown": len(lines),
        "trimmed": len(records) - len(lines),
        "tail": len(tail_idx),
        "ranks": sorted(ranks),
    }
    return [_line(r) for r in lines], info
