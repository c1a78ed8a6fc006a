"""The converter's two ways of translating per-step rows (a stretch at a time, or row by row) agree."""

from __future__ import annotations

import itertools
import logging
import math
import random
import time
import types
from typing import Any

import pytest

import traincard_otel
from traincard_otel import _safety
from traincard_otel._schema import Event
from traincard_otel._write import queue as _queue
from traincard_otel._write.convert.rows import RowBatcher
from traincard_otel._write.report import metrics as _metrics
from traincard_otel._write.report import phase as _phase
from traincard_otel._write.report import reporter as _reporter
from traincard_otel.testing import Capture, capture

NAMES = ("loss", "grad_norm", "learning_rate", "epoch")


def _report_stream(r: traincard_otel.Reporter, converter: Capture, seed: int, step_ends: bool) -> None:
    """Stretches between drains: half of them the plain per-step case, half with every kind of
    row the fast path must hand back to the row-by-row path, and rewinds in both. Without step
    ends (a loop that reports metrics only), the metric steps are the progress."""
    rng = random.Random(seed)
    step = 0
    for _ in range(60):
        messy = rng.random() < 0.5
        if rng.random() < 0.15:
            step = max(0, step - rng.randint(1, 80))  # a resume from an earlier checkpoint
        for _ in range(rng.randint(1, 20)):
            step += 1
            if rng.random() < 0.03:
                step = max(1, step - rng.randint(1, 5))  # a rewind inside a stretch
            values: dict[str, Any] = {n: rng.random() for n in NAMES}
            phase, tags, report_step = "train", None, step
            duration: float | None = rng.uniform(0.005, 0.02)
            wait: float | None = 0.001
            samples: int | None = 4
            parts: Any = (0.001, rng.random() * 0.01, 0.002, 0.0005, math.nan)
            if messy:
                roll = rng.random()
                if roll < 0.1:
                    values = {"eval_loss": rng.random()}  # other names
                elif roll < 0.2:
                    values["loss"] = math.nan  # recorded, with a warning
                elif roll < 0.3:
                    values["loss"] = 3  # an int: converted
                elif roll < 0.35:
                    values["loss"] = "high"  # rejected and counted
                elif roll < 0.4:
                    values["new_metric"] = 1.0  # a name not seen before
                elif roll < 0.5:
                    values = {}
                phase = "eval" if rng.random() < 0.1 else "train"
                tags = {"gpu": "0"} if rng.random() < 0.1 else None
                report_step = None if rng.random() < 0.1 else step
                duration = None if rng.random() < 0.1 else duration
                wait = rng.choice([None, -1.0, 0.0, 0.001, 0])
                samples = rng.choice([None, 4])
                parts = rng.choice([None, ("x",), (0.001, -1.0, 0.0, 0.0, 0.0), (1, 2, 3, 4, 5), parts])
            if rng.random() < 0.9:
                r.metrics(values, report_step, phase, tags)
            if step_ends and rng.random() < 0.95:
                r.step_end(step, duration, samples, 256, wait, parts=parts)
            if rng.random() < 0.02:
                r.event("traincard.test.marker", {"traincard.step": step})
        converter.drain()


def _translate(monkeypatch: pytest.MonkeyPatch, seed: int, step_ends: bool, at_once: bool) -> dict[str, Any]:
    taken = [0]
    original = RowBatcher._add_columns

    def add_columns(self: RowBatcher, items: Any) -> bool:
        ok = at_once and original(self, items)
        taken[0] += len(items) if ok else 0
        return ok

    monkeypatch.setattr(RowBatcher, "_add_columns", add_columns)
    # A step_end without a duration is timed by the reporter's clock: a clock that ticks alike in
    # both runs gives both the same measured durations.
    ticks = itertools.count()
    clock = types.SimpleNamespace(**{n: getattr(time, n) for n in ("time", "sleep", "monotonic")})
    clock.perf_counter = lambda: 1000.0 + next(ticks) * 0.001
    for module in (_reporter, _metrics, _phase):
        monkeypatch.setattr(module, "time", clock)
    monkeypatch.setattr(_queue, "time", clock)
    _safety._seen.clear()  # warnings once per run, both runs alike
    with capture() as cap:
        _report_stream(cap.reporter, cap, seed, step_ends)
        cap.drain()
        return _rows_of(cap, taken[0])


def _rows_of(cap: Capture, taken: int) -> dict[str, Any]:
    rows = cap.pipeline.converter.rows
    status = cap.status()
    out = {
        "metric_rows": [],
        "step_rows": [],
        "events": [],
        "taken": taken,
        "last_metrics": repr(status["last_metrics"]),
        "rejected": status["rejected"],
        "recent": repr(list(rows.recent_steps)),
        "max_step": rows.max_step,
    }
    for record in cap.logs:
        event, body, attrs = (
            record.log_record.event_name,
            record.log_record.body,
            record.log_record.attributes,
        )
        if event == Event.STATUS:
            continue
        if event == Event.METRICS:
            for run in body["runs"]:
                width = len(run["names"])
                for i, step in enumerate(run["steps"]):
                    row = run["values"][i * width : (i + 1) * width]
                    out["metric_rows"].append(repr((run["phase"], run["names"], run.get("tags"), step, row)))
        elif event == Event.STEP_TIMING:
            cols = [body[k] for k in ("steps", "durations", "waits", "samples", "tokens")]
            flat = body.get("parts") or [math.nan] * 5 * len(body["steps"])
            cols.append([flat[i * 5 : i * 5 + 5] for i in range(len(body["steps"]))])
            out["step_rows"].extend(repr(row) for row in zip(*cols, strict=True))
        else:
            out["events"].append(repr((event, {k: v for k, v in (attrs or {}).items() if k != "host.name"})))
    return out


@pytest.mark.parametrize("step_ends", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stretches_at_once_give_the_rows_and_events_of_row_by_row(
    monkeypatch: pytest.MonkeyPatch, seed: int, step_ends: bool
) -> None:
    at_once = _translate(monkeypatch, seed, step_ends, at_once=True)
    row_by_row = _translate(monkeypatch, seed, step_ends, at_once=False)
    assert row_by_row["taken"] == 0
    assert at_once["taken"] > 100  # the fast path did most of the work, not the fallback
    assert len(at_once["metric_rows"]) > 300 and (len(at_once["step_rows"]) > 300) == step_ends
    assert any("traincard.run.rewind" in e for e in at_once["events"])
    for key in ("metric_rows", "step_rows", "events", "last_metrics", "rejected", "recent", "max_step"):
        assert at_once[key] == row_by_row[key], key


def test_a_line_logged_every_step_leaves_the_rows_in_one_batch_and_events_in_order() -> None:
    """A Trainer's printer logs a line per step: the lines must not cut the rows into a batch per
    step. Each stretch's rows go out first, then its lines, then the event that ends it."""
    log = logging.getLogger("train")
    with capture() as cap:
        for step in range(1, 41):
            cap.reporter.metrics({"loss": 1.0 / step}, step)
            cap.reporter.step_end(step, 0.01)
            log.warning("step %d", step)
            if step == 20:
                cap.reporter.event("traincard.test.marker", {"traincard.step": step})
        cap.drain()
        ours = (Event.METRICS, Event.STEP_TIMING, "traincard.test.marker", "train: ")
        every = [r.log_record.event_name or str(r.log_record.body) for r in cap.logs]
        emitted = [name for name in every if name.startswith(ours)]
        first = [f"train: step {i}" for i in range(1, 21)]
        then = [f"train: step {i}" for i in range(21, 41)]
        batch = [Event.METRICS, Event.STEP_TIMING]
        assert emitted == [*batch, *first, "traincard.test.marker", *batch, *then]
        runs = [e.body["runs"] for e in cap.events(Event.METRICS)]  # type: ignore[index]
        assert [run[0]["steps"] for run in runs] == [list(range(1, 21)), list(range(21, 41))]
        timing = [e.body["steps"] for e in cap.events(Event.STEP_TIMING)]  # type: ignore[index]
        assert timing == [list(range(1, 21)), list(range(21, 41))]
