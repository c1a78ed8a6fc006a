"""The segment format: packed runs of per-step rows decode to exactly the rows they hold."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest

from traincard_otel._store import segment

NAN = math.nan


def _run(n: int, phase: str | None = "train", start: int = 0) -> dict[str, Any]:
    steps = list(range(start, start + n))
    values = [v for i in range(n) for v in (1 / (i + 1.7), 3e-4 * i)]
    return segment.metric_run(phase, ["loss", "lr"], steps, [1.7e9 + i / 3 for i in range(n)], values)


def _rows(n: int, phase: str | None = "train", start: int = 0) -> list[dict[str, Any]]:
    """The rows of ``_run(n, phase, start)`` as a reader sees them."""
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


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def canon(records: list[dict[str, Any]]) -> str:
        return json.dumps(records, sort_keys=True)  # NaN and inf compare as their JSON text

    return canon(a) == canon(b)


def test_runs_are_written_packed_and_decode_to_their_rows_in_order() -> None:
    event = {"k": "e", "t": 5.0, "n": "traincard.checkpoint.saved", "a": {"x": 1}}
    plain = {"k": "m", "t": 6.0, "s": 33, "p": "train", "v": {"loss": 0.5}}
    tagged = segment.metric_run(None, ["util"], [33, 34], [6.0, 7.0], [0.5, 0.75], {"gpu": "0"})
    records = [_run(30), event, _run(3, phase="eval", start=30), plain, tagged]
    data = segment.encode(records)
    assert [json.loads(line)["k"] for line in data.decode().splitlines()] == ["m*", "e", "m*", "m", "m*"]
    decoded, corrupt = segment.decode(data)
    assert not corrupt
    expected = [
        *_rows(30),
        event,
        *_rows(3, phase="eval", start=30),
        plain,
        {"k": "m", "t": 6.0, "s": 33, "p": None, "v": {"util": 0.5}, "g": {"gpu": "0"}},
        {"k": "m", "t": 7.0, "s": 34, "p": None, "v": {"util": 0.75}, "g": {"gpu": "0"}},
    ]
    assert _same(decoded, expected)
    assert len(data) < len(b"".join(json.dumps(r).encode() for r in expected)) / 2
    assert sum(segment.row_count(r) for r in records) == len(expected)


def test_step_ends_leave_out_what_was_not_measured() -> None:
    run = segment.step_run(
        [1, 2, 3],
        [10.0, 11.0, 12.0],
        [NAN, 0.01, 0.02],
        [NAN, NAN, 0.001],
        [0, 8, None],  # 0 (the converter) or null (older segments): no samples reported
        [0, 1024, 2048],
    )
    decoded, corrupt = segment.decode(segment.encode([run]))
    assert not corrupt
    assert decoded == [
        {"k": "st", "t": 10.0, "s": 1},
        {"k": "st", "t": 11.0, "s": 2, "d": 0.01, "n": 8, "tok": 1024},
        {"k": "st", "t": 12.0, "s": 3, "d": 0.02, "w": 0.001, "tok": 2048},
    ]


def test_floats_survive_bit_for_bit_nan_and_inf_included() -> None:
    values = {"a": NAN, "b": math.inf, "c": -math.inf, "d": 5e-324, "e": 0.1 + 0.2, "f": -0.0}
    run = segment.metric_run(None, list(values), [1], [1.0], list(values.values()))
    (back,), _ = segment.decode(segment.encode([run]))
    for name, value in values.items():
        got = back["v"][name]
        assert (math.isnan(got) and math.isnan(value)) or (
            got == value and math.copysign(1, got) == math.copysign(1, value)
        ), name


def test_ragged_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="one value per name"):
        segment.metric_run("train", ["loss", "lr"], [1, 2], [1.0, 2.0], [0.5, 0.1, 0.4])
    with pytest.raises(ValueError, match="needs names"):
        segment.metric_run("train", [], [1], [1.0], [])
    with pytest.raises(ValueError, match="per step"):
        segment.step_run([1, 2], [1.0, 2.0], [0.1], [NAN, NAN], [0, 0], [0, 0])
    with pytest.raises(TypeError):
        segment.metric_run("train", ["loss"], [1], [1.0], ["high"])


def test_a_damaged_packed_line_is_skipped_and_the_segment_counted_corrupt() -> None:
    packed = json.loads(segment.encode([_run(4)]))
    packed["v"] = base64.b64encode(b"\0" * 24).decode()  # three values for four rows of two
    steps = segment.step_run([1, 2], [1.0, 2.0], [0.1, 0.1], [NAN, NAN], [0, 0], [0, 0])
    data = (json.dumps(packed) + "\n").encode() + segment.encode([steps]) + b"{not json\n"
    decoded, corrupt = segment.decode(data)
    assert corrupt
    assert [r["k"] for r in decoded] == ["st", "st"]


def test_plain_segments_written_one_record_per_line_are_still_read() -> None:
    records = [*_rows(3), {"k": "st", "t": 1.0, "s": 1, "d": 0.5, "n": 4}]
    plain = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    decoded, corrupt = segment.decode(plain)
    assert not corrupt and _same(decoded, records)


def test_a_run_of_lines_is_one_line_and_decodes_to_a_record_a_line() -> None:
    run = segment.line_run(
        [1.5, 2.5], ["INFO", "ERROR"], ["a", "ValueError: x"], {"rank": "0"}, {1: "Traceback\nValueError: x"}
    )
    data = segment.encode([run, {"k": "e", "t": 3.0, "n": "between", "a": {}}])
    assert data.count(b"\n") == 2 and segment.row_count(run) == 2
    records, corrupt = segment.decode(data)
    assert not corrupt
    assert records[:2] == [
        {"k": "l", "t": 1.5, "lvl": "INFO", "msg": "a", "a": {"rank": "0"}},
        {
            "k": "l",
            "t": 2.5,
            "lvl": "ERROR",
            "msg": "ValueError: x",
            "a": {"rank": "0", "exception.stacktrace": "Traceback\nValueError: x"},
        },
    ]
    kept, _ = segment.decode(data, columns_kept=True)
    assert kept[0]["msg"] == ["a", "ValueError: x"] and list(kept[0]["t"]) == [1.5, 2.5]
    with pytest.raises(ValueError):
        segment.line_run([1.0], ["INFO", "INFO"], ["a"], {})
    damaged = json.loads(data.splitlines()[0])
    damaged["lvl"] = ["INFO"]  # one level for two lines
    records, corrupt = segment.decode(json.dumps(damaged).encode() + b"\n" + data.splitlines()[1] + b"\n")
    assert corrupt and [r["k"] for r in records] == ["e"]
