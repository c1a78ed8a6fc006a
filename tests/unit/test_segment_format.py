"""The segment format: packed runs of per-step rows decode to exactly the records written."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from traincard_otel.store import segment


def _rows(n: int, phase: str | None = "train", start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "k": "m",
            "t": 1.7e9 + i / 3,
            "s": start + i,
            "p": phase,
            "v": {"loss": 1 / (i + 1.7), "lr": 3e-4 * i},
        }
        for i in range(n)
    ]


def _steps(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {"k": "st", "t": 1.7e9 + i / 7, "s": i}
        if i % 2:
            row["d"], row["n"], row["tok"] = 0.01 + i / 1e5, 8, 8 * 128
        if i % 3:
            row["w"] = i / 1e6
        out.append(row)
    return out


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def canon(records: list[dict[str, Any]]) -> str:
        return json.dumps(records, sort_keys=True)  # NaN and inf compare as their JSON text

    return canon(a) == canon(b)


def test_runs_of_rows_are_packed_and_decode_to_the_same_records_in_order() -> None:
    records = [
        *_rows(30),
        *_steps(30),
        {"k": "e", "t": 5.0, "n": "traincard.checkpoint.saved", "a": {"x": 1}},
        *_rows(3, phase="eval", start=30),
        {"k": "m", "t": 6.0, "s": 33, "p": "train", "v": {"loss": 0.5}, "g": {"gpu": "0"}},  # tags: plain
        *_rows(2, start=34),
    ]
    data = segment.encode(records)
    lines = data.decode().splitlines()
    kinds = [json.loads(line)["k"] for line in lines]
    assert kinds == ["m*", "st*", "e", "m*", "m", "m*"]
    decoded, corrupt = segment.decode(data)
    assert not corrupt
    assert _same(decoded, records)
    assert len(data) < len(b"".join(json.dumps(r).encode() for r in records)) / 2


def test_floats_survive_bit_for_bit_nan_and_inf_included() -> None:
    values = {"a": math.nan, "b": math.inf, "c": -math.inf, "d": 5e-324, "e": 0.1 + 0.2, "f": -0.0}
    records = [{"k": "m", "t": 1.0, "s": 1, "p": None, "v": values}]
    (back,), _ = segment.decode(segment.encode(records))
    for name, value in values.items():
        got = back["v"][name]
        assert (math.isnan(got) and math.isnan(value)) or (
            got == value and math.copysign(1, got) == math.copysign(1, value)
        ), name


def test_rows_that_cannot_be_packed_are_written_plainly() -> None:
    records = [
        {"k": "m", "t": 1.0, "s": 1, "p": None, "v": {"loss": 0.5}},
        {"k": "m", "t": 2.0, "s": 2, "p": None, "v": {"loss": "high"}},  # not a number
        {"k": "st", "t": 3.0, "s": 3, "d": math.nan},  # a NaN that is really there
        {"k": "st", "t": 4.0, "s": 4, "extra": True},  # a field the packed form has no column for
        {"k": "m", "t": 5, "s": 5, "p": None, "v": {"loss": 0.5}},  # an int time would come back a float
    ]
    data = segment.encode(records)
    assert [json.loads(line)["k"] for line in data.decode().splitlines()] == ["m*", "m", "st", "st", "m"]
    decoded, corrupt = segment.decode(data)
    assert not corrupt and _same(decoded, records)


def test_a_damaged_packed_line_is_skipped_and_the_segment_counted_corrupt() -> None:
    good = segment.encode(_rows(4))
    packed = json.loads(good)
    packed["v"] = base64.b64encode(b"\0" * 24).decode()  # three values for four rows of two
    data = (json.dumps(packed) + "\n").encode() + segment.encode(_steps(2)) + b"{not json\n"
    decoded, corrupt = segment.decode(data)
    assert corrupt
    assert [r["k"] for r in decoded] == ["st", "st"]


def test_plain_segments_written_one_record_per_line_are_still_read() -> None:
    records = [*_rows(3), *_steps(3)]
    plain = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    decoded, corrupt = segment.decode(plain)
    assert not corrupt and _same(decoded, records)
