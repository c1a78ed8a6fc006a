"""Store records in memory and in segment files: one JSON object per line, per-step rows packed.

Per-step rows never exist one dict per row on their way to storage: the converter collects them column
by column, and the writer, the segment files and compaction keep them that way. Formatting floats
as decimal text was the store writer's main cost (about 1.4 µs per float on a 2-vCPU machine, ten
or more per step), so in a file the float columns are little-endian float64 arrays in base64:
lossless (NaN and inf included), about ten times cheaper to write, and a third smaller.

``m*`` (a run of metric rows sharing a phase, names and tags): ``p`` phase, ``n`` names,
``s`` steps, ``t`` times, ``v`` values (row-major: one row of ``len(n)`` values per step),
``g`` tags (only when tagged).

``st*`` (a run of step ends): ``s`` steps, ``n`` samples, ``tok`` tokens (0 or ``null`` where
absent), ``t`` times, ``d`` durations, ``w`` data-wait times (NaN where absent), and ``a`` when
the steps carry their anatomy: ``len(STEP_PARTS)`` seconds per step, row-major (data, forward,
backward, optimizer, communication; NaN where not measured).

``l*`` (the log lines console capture read in one go): ``t`` times, ``lvl`` levels, ``msg`` the
lines, ``a`` every line's attributes, ``tb`` the traceback a line ends, by the line's index (only
when one does).

In memory ``t``, ``v``, ``d``, ``w`` and ``a`` (of ``st*``) are ``array('d')``; in a file, base64
text. Every other record is a plain JSON line. :func:`decode` expands runs into the ordinary ``m``,
``st`` and ``l`` records (documented in ``docs/architecture.md``), so readers see one record per row.
"""

from __future__ import annotations

import base64
import json
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence

from .._gil import Slices
from .._schema import STEP_PARTS, Attr, StoreKind
from .._types import JsonObject, JsonValue

Record = JsonObject
WIDTH = len(STEP_PARTS)

PACKED_METRICS = "m*"
PACKED_STEPS = "st*"
PACKED_LINES = "l*"
PACKED = (PACKED_METRICS, PACKED_STEPS, PACKED_LINES)

_SWAP = sys.byteorder != "little"


def _json_default(obj: object) -> object:
    return str(obj)


# One encoder for all records: json.dumps() with options builds a new encoder per call.
# NaN/inf are kept (Python's json reads them back); the card turns them into gaps.
_encode = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


def metric_run(
    phase: str | None,
    names: Sequence[str],
    steps: Sequence[int | None],
    times: Iterable[float],
    values: Iterable[float],
    tags: Mapping[str, str] | None = None,
) -> Record:
    """A packed run of ``len(steps)`` metric rows; ``values`` row-major. Raises on ragged columns."""
    t, v = array("d", times), array("d", values)
    if not steps or not names or len(t) != len(steps) or len(v) != len(names) * len(steps):
        raise ValueError("a metric run needs names, and one time and one value per name for each step")
    run: Record = {"k": PACKED_METRICS, "p": phase, "n": list(names), "s": steps, "t": t, "v": v}
    if tags:
        run["g"] = dict(tags)
    return run


def step_run(
    steps: Sequence[int | None],
    times: Iterable[float],
    durations: Iterable[float],
    waits: Iterable[float],
    samples: list[int | None],
    tokens: list[int | None],
    parts: Iterable[float] | None = None,
) -> Record:
    """A packed run of step ends (NaN duration or wait: not measured), with their anatomy when
    ``parts`` (row-major, ``WIDTH`` per step) is given. Raises on ragged columns."""
    t, d, w = array("d", times), array("d", durations), array("d", waits)
    if not steps or not len(t) == len(d) == len(w) == len(samples) == len(tokens) == len(steps):
        raise ValueError("a step run needs one time, duration, wait, samples and tokens per step")
    run: Record = {"k": PACKED_STEPS, "s": steps, "n": samples, "tok": tokens, "t": t, "d": d, "w": w}
    if parts is not None:
        a = array("d", parts)
        if len(a) != WIDTH * len(steps):
            raise ValueError(f"a step run's parts need {WIDTH} seconds per step")
        run["a"] = a
    return run


def line_run(
    times: Iterable[float],
    levels: list[str],
    lines: list[str],
    attributes: Mapping[str, JsonValue],
    tracebacks: Mapping[int, str] | None = None,
) -> Record:
    """A packed run of log lines sharing ``attributes``; ``tracebacks`` by line index."""
    t = array("d", times)
    if not lines or not len(t) == len(levels) == len(lines):
        raise ValueError("a run of lines needs one time and one level per line")
    run: Record = {"k": PACKED_LINES, "t": t, "lvl": levels, "msg": lines, "a": dict(attributes)}
    if tracebacks:
        run["tb"] = {str(i): text for i, text in tracebacks.items()}
    return run


def row_count(rec: Record) -> int:
    """Rows a record holds: a packed run's length, else 1 (what buffer limits count)."""
    kind = rec.get("k")
    if kind == PACKED_LINES:
        return len(rec["msg"])
    return len(rec["s"]) if kind in PACKED else 1


def _f64(values: array[float]) -> str:
    if _SWAP:
        values = array("d", values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _unf64(text: str) -> array[float]:
    values = array("d", base64.b64decode(text, validate=True))
    if _SWAP:
        values.byteswap()
    return values


#: The float columns of each kind of packed run, base64 in a file.
_FLOAT_FIELDS = {PACKED_METRICS: ("t", "v"), PACKED_STEPS: ("t", "d", "w", "a"), PACKED_LINES: ("t",)}


def encode_line(rec: Record) -> str:
    """One record as its segment line (no newline); what a part keeps of a record it keeps whole."""
    kind = rec.get("k")
    fields = _FLOAT_FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return _encode(rec)
    # Base64 needs no escaping: its text is added after the encoder's, not scanned by it (the
    # scan cost four times the base64 encoding of a run of metric rows).
    head = _encode({k: v for k, v in rec.items() if k not in fields})
    floats = "".join(f',"{k}":"{_f64(rec[k])}"' for k in fields if k in rec)
    return f"{head[:-1]}{floats}}}"


def encode(records: list[Record]) -> bytes:
    """One segment's bytes for ``records`` (in order; decoded back by :func:`decode`)."""
    slices, lines = Slices(), []
    for rec in records:  # a flush's records, in slices: the GIL goes to the training thread now and then
        lines.append(encode_line(rec) + "\n")
        slices.check()
    return "".join(lines).encode()


def _records(data: bytes) -> tuple[list[Record], bool]:
    """The JSON objects of a segment's lines, and whether any line was corrupt (and skipped)."""
    lines = [line for line in data.splitlines() if line.strip()]
    try:  # one parse for the whole segment; line by line only when something is wrong
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        parsed = None
    if isinstance(parsed, list) and all(isinstance(r, dict) for r in parsed):
        return parsed, False
    return _parse_lines(lines)


def decode(data: bytes, *, columns_kept: bool = False) -> tuple[list[Record], bool]:
    """The records of a segment, and whether any line of it was corrupt (and skipped).

    ``columns_kept``: packed runs stay one record of columns (:func:`step_columns`,
    :func:`metric_columns`), for readers that add whole columns rather than one row at a time.
    """
    parsed, corrupt = _records(data)
    out: list[Record] = []
    for rec in parsed:
        kind = rec.get("k")
        try:
            if kind == PACKED_STEPS:
                out.extend([step_columns(rec)] if columns_kept else _unpack_steps(rec))
            elif kind == PACKED_METRICS:
                out.extend([metric_columns(rec)] if columns_kept else _unpack_metrics(rec))
            elif kind == PACKED_LINES:
                out.extend([line_columns(rec)] if columns_kept else unpack_lines(line_columns(rec)))
            else:
                out.append(rec)
        except (ValueError, TypeError, KeyError):
            corrupt = True
    return out, corrupt


def step_columns(rec: Record) -> Record:
    """A packed run of step ends with its float columns decoded (raises on ragged columns)."""
    cols = {**rec, "t": _unf64(rec["t"]), "d": _unf64(rec["d"]), "w": _unf64(rec["w"])}
    n = len(rec["s"])
    if not len(cols["t"]) == len(cols["d"]) == len(cols["w"]) == len(rec["n"]) == len(rec["tok"]) == n:
        raise ValueError("packed step ends: column lengths differ")
    if "a" in rec:
        cols["a"] = _unf64(rec["a"])
        if len(cols["a"]) != WIDTH * n:
            raise ValueError("packed step ends: the parts column's length differs")
    return cols


def metric_columns(rec: Record) -> Record:
    """A packed run of metric rows with its float columns decoded (raises on ragged columns)."""
    cols = {**rec, "t": _unf64(rec["t"]), "v": _unf64(rec["v"])}
    names, steps = rec["n"], rec["s"]
    if not isinstance(names, list) or not isinstance(steps, list) or not names:
        raise ValueError("packed metric rows: names and steps must be lists")
    if len(cols["t"]) != len(steps) or len(cols["v"]) != len(names) * len(steps):
        raise ValueError("packed metric rows: column lengths differ")
    return cols


def line_columns(rec: Record) -> Record:
    """A packed run of log lines with its times decoded (raises on ragged columns)."""
    cols = {**rec, "t": _unf64(rec["t"]) if isinstance(rec["t"], str) else rec["t"]}
    lines, levels, tracebacks = rec["msg"], rec["lvl"], rec.get("tb") or {}
    if not isinstance(lines, list) or not isinstance(levels, list) or not isinstance(tracebacks, dict):
        raise ValueError("packed log lines: lines and levels must be lists, tracebacks an object")
    if not len(cols["t"]) == len(levels) == len(lines) or not isinstance(rec.get("a"), dict):
        raise ValueError("packed log lines: column lengths differ, or no attributes")
    return cols


def unpack_lines(rec: Record) -> list[Record]:
    """A packed run of log lines (:func:`line_columns`) as one ``l`` record a line."""
    attrs: dict[str, JsonValue] = rec["a"]
    tracebacks: dict[str, str] = rec.get("tb") or {}
    out = []
    for i, (t, level, text) in enumerate(zip(rec["t"], rec["lvl"], rec["msg"], strict=True)):
        traceback = tracebacks.get(str(i))
        a = attrs if traceback is None else {**attrs, Attr.EXCEPTION_STACKTRACE: traceback}
        out.append({"k": StoreKind.LOG, "t": t, "lvl": level, "msg": text, "a": dict(a)})
    return out


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
    steps: list[JsonValue] = rec["s"]
    times, values = _unf64(rec["t"]), _unf64(rec["v"])
    width = len(names)
    if len(times) != len(steps) or len(values) != width * len(steps):
        raise ValueError("packed metric rows: column lengths differ")
    phase, tags = rec.get("p"), rec.get("g")
    out = []
    for i, (t, s) in enumerate(zip(times, steps, strict=True)):
        row: Record = {
            "k": "m",
            "t": t,
            "s": s,
            "p": phase,
            "v": dict(zip(names, values[i * width : i * width + width], strict=True)),
        }
        if tags:
            row["g"] = tags
        out.append(row)
    return out


def _unpack_steps(rec: Record) -> list[Record]:
    steps: list[JsonValue] = rec["s"]
    times, durations, waits = _unf64(rec["t"]), _unf64(rec["d"]), _unf64(rec["w"])
    samples: list[JsonValue] = rec["n"]
    tokens: list[JsonValue] = rec["tok"]
    n = len(steps)
    if not len(times) == len(durations) == len(waits) == len(samples) == len(tokens) == n:
        raise ValueError("packed step ends: column lengths differ")
    parts = _unf64(rec["a"]) if "a" in rec else None
    if parts is not None and len(parts) != WIDTH * n:
        raise ValueError("packed step ends: the parts column's length differs")
    out = []
    for i in range(n):
        row: Record = {"k": "st", "t": times[i], "s": steps[i]}
        if parts is not None:
            row["a"] = parts[i * WIDTH : i * WIDTH + WIDTH].tolist()
        if durations[i] == durations[i]:
            row["d"] = durations[i]
        if waits[i] == waits[i]:
            row["w"] = waits[i]
        if samples[i]:
            row["n"] = samples[i]
        if tokens[i]:
            row["tok"] = tokens[i]
        out.append(row)
    return out
