"""The completions table stays bounded: 10,000 completions keep the latest steps whole and a
sample of earlier ones, and the card shows a bounded, escaped-on-the-page slice of them."""

from __future__ import annotations

import json

from traincard_otel._data.completions import MAX_CHARS, MAX_ROWS, Completions, rows_of
from traincard_otel._data.rundata import RunData
from traincard_otel._read.payload import Mode
from traincard_otel._read.payload.completions import CARD_CHARS, CARD_ROWS, LIVE_ROWS, completions_section


def _body(step: int, n: int, long: bool = False) -> dict[str, object]:
    text = "x" * (MAX_CHARS + 500) if long else f"completion {step}"
    return {
        "prompt": [[{"role": "user", "content": f"prompt {step}.{i}"}] for i in range(n)],
        "completion": [f"{text} {i}" for i in range(n)],
        "rewards": {"star": [float(i) for i in range(n)], "short": [None] * n},
        "advantage": [0.5] * n,
    }


def _table(total: int = 10_000, per_step: int = 8) -> Completions:
    table = Completions()
    for step in range(1, total // per_step + 1):
        table.add(rows_of(step, _body(step, per_step)))
    return table


def test_ten_thousand_completions_keep_the_latest_steps_and_a_sample() -> None:
    table = _table()
    rows = table.rows()
    assert table.seen == 10_000 and len(table) == len(rows) == MAX_ROWS
    steps = [r.step for r in rows]
    assert steps == sorted(steps)
    recent = [r for r in rows if r.step is not None and r.step > 1250 - 4]
    assert len(recent) == 4 * 8  # the latest four steps whole
    earlier = {r.step for r in rows} - {1247, 1248, 1249, 1250}
    assert min(earlier) < 200 and max(earlier) > 1000  # a sample from the whole run
    assert rows[-1].prompt == "user: prompt 1250.7" and rows[-1].rewards == {"star": 7.0, "short": None}
    assert _table().rows() == rows  # the same rows on every read


def test_long_texts_are_cut_saying_how_much() -> None:
    (row,) = rows_of(3, _body(3, 1, long=True))
    assert len(row.completion) < MAX_CHARS + 40 and row.completion.endswith("[502 more characters]")


def test_one_step_larger_than_the_bound_keeps_its_latest_rows() -> None:
    table = Completions(max_rows=10)
    table.add(rows_of(1, _body(1, 25)))
    assert len(table) == 10 and table.rows()[-1].completion.endswith(" 24")


def test_the_card_shows_a_bounded_slice() -> None:
    data = RunData(source="test")
    data.completions = _table()
    full = completions_section(data, Mode(live=False))
    assert len(full["rows"]) == CARD_ROWS and full["rows"][0]["step"] == 1250
    assert full["kept"] == MAX_ROWS and full["seen"] == 10_000 and full["rewards"] == ["star", "short"]
    live = completions_section(data, Mode(True, 20, 40, False))
    assert len(live["rows"]) == 8 <= LIVE_ROWS and {r["step"] for r in live["rows"]} == {1250}
    assert len(json.dumps(live)) < 5_000
    data.completions = Completions()
    data.completions.add(rows_of(1, _body(1, 2, long=True)))
    assert all(
        len(r["completion"]) < CARD_CHARS + 40 for r in completions_section(data, Mode(live=False))["rows"]
    )
