"""The segment format: one JSON object per line, with runs of per-step rows packed.

Formatting floats as decimal text was the store writer's main cost: about 1.4 µs per float on a
2-vCPU machine, and a step writes ten or more of them. So consecutive metric rows with the same
phase and names (and no tags), and consecutive step ends, are written as one packed line whose
float columns are little-endian float64 arrays in base64: lossless (NaN and inf included), about
ten times cheaper to write, and a third smaller. Every other record is a plain JSON line.

Packed lines exist only in segment files; :func:`decode` expands them back into the ordinary
``m`` and ``st`` records, so nothing else in the package sees them.

``m*`` (packed metric rows): ``p`` phase, ``n`` names, ``s`` steps, ``t`` times (f64),
``v`` values (f64, row-major: one row of ``len(n)`` values per step).

``st*`` (packed step ends): ``s`` steps, ``n`` samples, ``tok`` tokens (JSON lists, ``null`` where
absent), ``t`` times, ``d`` durations, ``w`` data-wait times (f64; NaN where absent).
"""

from __future__ import annotations

import base64
import json
import math
import sys
from array import array
from collections.abc import Iterator
from typing import Any

Record = dict[str, Any]

PACKED_METRICS = "m*"
PACKED_STEPS = "st*"

_METRIC_KEYS = {"k", "t", "s", "p", "v"}
_STEP_KEYS = frozenset({"k", "t", "s", "d", "w", "n", "tok"})
_NAN = math.nan
_SWAP = sys.byteorder != "little"


def _json_default(obj: object) -> object:
    return str(obj)


# One encoder for all records: json.dumps() with options builds a new encoder per call.
# NaN/inf are kept (Python's json reads them back); the card turns them into gaps.
_encode = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


def _f64(values: array[float]) -> str:
    if _SWAP:
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _unf64(text: str) -> array[float]:
    values = array("d", base64.b64decode(text, validate=True))
    if _SWAP:
        values.byteswap()
    return values


class _MetricRun:
    """Consecutive metric rows sharing a phase and names, accumulated column by column."""

    def __init__(self, phase: Any, names: tuple[str, ...]) -> None:
        self.phase, self.names = phase, names
        self.steps: list[Any] = []
        self.times: array[float] = array("d")
        self.values: array[float] = array("d")

    def add(self, t: float, step: Any, row: array[float]) -> None:
        self.times.append(t)
        self.steps.append(step)
        self.values.extend(row)

    def line(self) -> str:
        return _encode(
            {
                "k": PACKED_METRICS,
                "p": self.phase,
                "n": list(self.names),
                "s": self.steps,
                "t": _f64(self.times),
                "v": _f64(self.values),
            }
        )


class _StepRun:
    """Consecutive step ends, accumulated column by column."""

    def __init__(self) -> None:
        self.steps: list[Any] = []
        self.samples: list[Any] = []
        self.tokens: list[Any] = []
        self.times: array[float] = array("d")
        self.durations: array[float] = array("d")
        self.waits: array[float] = array("d")

    def add(self, rec: Record) -> None:
        d, w = rec.get("d", _NAN), rec.get("w", _NAN)
        self.times.append(rec["t"])
        self.durations.append(d)
        self.waits.append(w)
        self.steps.append(rec["s"])
        self.samples.append(rec.get("n"))
        self.tokens.append(rec.get("tok"))

    def line(self) -> str:
        return _encode(
            {
                "k": PACKED_STEPS,
                "s": self.steps,
                "n": self.samples,
                "tok": self.tokens,
                "t": _f64(self.times),
                "d": _f64(self.durations),
                "w": _f64(self.waits),
            }
        )


def _packable_step(rec: Record) -> bool:
    if not (rec.keys() <= _STEP_KEYS and "t" in rec and "s" in rec):
        return False
    for field in ("t", "d", "w"):
        value = rec.get(field, 0.0)
        # NaN marks an absent duration or wait in a packed run; a NaN really there (the pump never
        # produces one) is written plainly rather than lost.
        if type(value) not in (float, int) or value != value:
            return False
    return True


def _metric_row(rec: Record) -> array[float] | None:
    """A metric row's values as a packed row, or None if the row must be written plainly."""
    if rec.keys() != _METRIC_KEYS or type(rec["v"]) is not dict or type(rec["t"]) is not float:
        return None
    try:
        return array("d", rec["v"].values())
    except TypeError:  # a value that is not a number
        return None


def _lines(records: list[Record]) -> Iterator[str]:
    run: _MetricRun | _StepRun | None = None
    for rec in records:
        kind = rec.get("k")
        row = _metric_row(rec) if kind == "m" else None
        if row is not None:
            names = tuple(rec["v"])
            if not (type(run) is _MetricRun and run.names == names and run.phase == rec["p"]):
                if run is not None:
                    yield run.line()
                run = _MetricRun(rec["p"], names)
            run.add(rec["t"], rec["s"], row)
        elif kind == "st" and _packable_step(rec):
            if type(run) is not _StepRun:
                if run is not None:
                    yield run.line()
                run = _StepRun()
            run.add(rec)
        else:
            if run is not None:
                yield run.line()
                run = None
            yield _encode(rec)
    if run is not None:
        yield run.line()


def encode(records: list[Record]) -> bytes:
    """One segment's bytes for ``records`` (in order; decoded back by :func:`decode`)."""
    return "".join(line + "\n" for line in _lines(records)).encode()


def decode(data: bytes) -> tuple[list[Record], bool]:
    """The records of a segment, and whether any line of it was corrupt (and skipped)."""
    lines = [line for line in data.splitlines() if line.strip()]
    try:  # one parse for the whole segment; line by line only when something is wrong
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        parsed = None
    corrupt = False
    if not isinstance(parsed, list) or not all(isinstance(r, dict) for r in parsed):
        parsed, corrupt = _parse_lines(lines)
    out: list[Record] = []
    for rec in parsed:
        kind = rec.get("k")
        if kind in (PACKED_METRICS, PACKED_STEPS):
            try:
                out.extend(_unpack_metrics(rec) if kind == PACKED_METRICS else _unpack_steps(rec))
            except (ValueError, TypeError, KeyError):
                corrupt = True
        else:
            out.append(rec)
    return out, corrupt


def _parse_lines(lines: list[bytes]) -> tuple[list[Record], bool]:
    out, corrupt = [], False
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            corrupt = True
            continue
        if isinstance(rec, dict):
            out.append(rec)
        else:
            corrupt = True
    return out, corrupt


def _unpack_metrics(rec: Record) -> list[Record]:
    names: list[str] = rec["n"]
    steps: list[Any] = rec["s"]
    times, values = _unf64(rec["t"]), _unf64(rec["v"])
    width = len(names)
    if len(times) != len(steps) or len(values) != width * len(steps):
        raise ValueError("packed metric rows: column lengths differ")
    phase = rec.get("p")
    return [
        {
            "k": "m",
            "t": t,
            "s": s,
            "p": phase,
            "v": dict(zip(names, values[i * width : i * width + width], strict=True)),
        }
        for i, (t, s) in enumerate(zip(times, steps, strict=True))
    ]


def _unpack_steps(rec: Record) -> list[Record]:
    steps: list[Any] = rec["s"]
    times, durations, waits = _unf64(rec["t"]), _unf64(rec["d"]), _unf64(rec["w"])
    samples: list[Any] = rec["n"]
    tokens: list[Any] = rec["tok"]
    n = len(steps)
    if not len(times) == len(durations) == len(waits) == len(samples) == len(tokens) == n:
        raise ValueError("packed step ends: column lengths differ")
    out = []
    for i in range(n):
        row: Record = {"k": "st", "t": times[i], "s": steps[i]}
        if durations[i] == durations[i]:
            row["d"] = durations[i]
        if waits[i] == waits[i]:
            row["w"] = waits[i]
        if samples[i] is not None:
            row["n"] = samples[i]
        if tokens[i] is not None:
            row["tok"] = tokens[i]
        out.append(row)
    return out
