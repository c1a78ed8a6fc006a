"""torchrun's own failure report, read back from a node's captured console: the agent's record
under plain ``torchrun`` (``python -m torch.distributed.run``).

``python -m traincard_otel.torchrun`` writes the elastic agent's record (``elastic/*.json``) to the
store. Plain torchrun does not, but when it fails it prints the same facts, and the Metaflow step
process that started it captures that output (its children inherit its stdout and stderr, which
console capture reads at the descriptor): ``ChildFailedError``'s report (torch >= 1.9)::

    Failures:
    [1]:
      time      : 2026-11-25_06:00:01
      host      : node1
      rank      : 2 (local_rank: 0)
      exitcode  : -15 (pid: 4321) SIGTERM
      ...
    Root Cause (first observed failure):
    [0]:
      time      : 2026-11-25_06:00:00
      host      : node1
      rank      : 3 (local_rank: 1)
      exitcode  : -9 (pid: 4322) SIGKILL
      error_file: <N/A>
      traceback : Signal 9 (SIGKILL) received by PID 4322

Each entry with a rank and an exit code becomes a failure in the shape the wrapper writes. Only
whole entries are used: a line that is not one of the report's is skipped, so output of other
processes interleaved with the report does not confuse it, and an entry cut short is not guessed.
"""

from __future__ import annotations

import contextlib
import datetime
import re
from collections.abc import Iterable, Mapping

from ..._types import JsonObject, JsonValue

_HEADING = re.compile(r"^(Root Cause \(first observed failure\)|Failures):\s*$")
_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"^(\d+) \(local_rank: (\d+)\)")
_EXIT = re.compile(r"^(-?\d+) \(pid: (\d+)\)")
_BORDER = re.compile(r"^[=]{8,}\s*$")
NOT_AVAILABLE = "<N/A>"
REPORT_MARK = "Root Cause (first observed failure)"  # in every report: a cheap test for one


def _entry(fields: Mapping[str, str], root: bool) -> JsonObject | None:
    rank, code = _RANK.match(fields.get("rank", "")), _EXIT.match(fields.get("exitcode", ""))
    if rank is None or code is None:
        return None
    exitcode = int(code[1])
    when: float | None = None
    with contextlib.suppress(ValueError):  # isoformat(sep="_"), the agent's local time as read here
        when = datetime.datetime.fromisoformat(fields.get("time", "").replace("_", "T")).timestamp()
    error_file = fields.get("error_file", NOT_AVAILABLE).strip()
    return {
        "rank": int(rank[1]),
        "local_rank": int(rank[2]),
        "pid": int(code[2]),
        "exitcode": exitcode,
        "signal": (fields["exitcode"][code.end() :].strip(" ()") or None) if exitcode < 0 else None,
        "time": when,
        "message": fields.get("traceback", "").strip()[:2000],
        "traceback": None,
        "error_file": None if error_file in ("", NOT_AVAILABLE) else error_file,
        "host": fields.get("host", "").strip() or None,
        "root_cause": root,
    }


def parse_failures(lines: Iterable[str]) -> list[JsonObject]:
    """The failures in every torchrun report among ``lines`` (the root cause of each marked)."""
    out: list[JsonObject] = []
    section: str | None = None
    fields: dict[str, str] | None = None

    def close() -> None:
        nonlocal fields
        if fields is not None and section is not None:
            found = _entry(fields, section.startswith("Root"))
            if found is not None:
                out.append(found)
        fields = None

    for line in lines:
        text = line.rstrip("\n")
        if heading := _HEADING.match(text):
            close()
            section = heading[1]
        elif section is None:
            continue
        elif _ENTRY.match(text):
            close()
            fields = {}
        elif fields is not None and (field := _FIELD.match(text)):
            fields.setdefault(field[1], field[2])
        elif _BORDER.match(text) or set(text.strip()) == {"-"}:
            close()
            if _BORDER.match(text):
                section = None
    close()
    return out


def agent_records(logs: Iterable[Mapping[str, JsonValue]], node_index: int) -> list[JsonObject]:
    """Agent records (the shape ``traincard_otel.torchrun`` writes) from the torchrun reports in
    one node's log lines, one per attempt that printed one."""
    by_attempt: dict[int, list[Mapping[str, JsonValue]]] = {}
    for line in logs:
        message = line.get("message")
        if isinstance(message, str):
            by_attempt.setdefault(int(line.get("attempt") or 0), []).append(line)
    records = []
    for attempt, lines in sorted(by_attempt.items()):
        failures = parse_failures(str(line["message"]) for line in lines)
        if not failures:
            continue
        seen: dict[int, JsonObject] = {}
        for f in failures:  # a report printed twice (stderr and a log) names each rank once
            seen.setdefault(f["rank"], f)
        hosts = [f["host"] for f in failures if f["host"]]
        records.append(
            {
                "node_rank": node_index,
                "host": hosts[0] if hosts else None,
                "attempt": attempt,
                "started_at": None,
                "ended_at": max(float(line.get("time") or 0) for line in lines),
                "exit_code": 1,
                "failures": list(seen.values()),
                "source": "torchrun's failure report (console)",
            }
        )
    return records
