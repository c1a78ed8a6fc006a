"""Hostile input: every value is stored or counted as rejected with its reason, never raised into
training and never dropping a valid neighbour; every text survives to the store encodable."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import torch

from traincard_otel import _safety
from traincard_otel._schema import Event
from traincard_otel.testing import capture


class _Exploding:
    def __float__(self) -> float:
        raise RuntimeError("no float for you")

    def item(self) -> float:
        raise KeyError("nor an item")


class _BadStr(Exception):
    def __str__(self) -> str:
        raise ValueError("unprintable")


HOSTILE: dict[str, Any] = {
    "nan": math.nan,
    "pinf": math.inf,
    "ninf": -math.inf,
    "huge_int": 10**400,
    "np_float": np.float32(0.5),
    "np_int": np.int64(3),
    "torch_0d": torch.tensor(0.25),
    "torch_1x": torch.tensor([0.75]),
    "torch_1d": torch.tensor([1.0, 2.0]),
    "none": None,
    "bool": True,
    "text": "0.5",
    "nested": {"a": 1.0},
    "exploding": _Exploding(),
}
STORED = {"nan", "pinf", "ninf", "np_float", "np_int", "torch_0d", "torch_1x", "bool"}


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    _safety._seen.clear()


def test_each_hostile_value_is_stored_or_rejected_and_never_drops_its_neighbours() -> None:
    with capture() as cap:
        for step, (name, value) in enumerate(HOSTILE.items(), start=1):
            cap.reporter.metrics({"loss": 1.0 / step, name: value}, step=step)
        run = cap.load()
        rejected = cap.status()["rejected"]
    assert run.metrics["loss"].steps == list(range(1, len(HOSTILE) + 1))  # every neighbour kept
    assert {n for n in HOSTILE if n in run.metrics} == STORED
    assert run.metrics["torch_0d"].values == [0.25] and run.metrics["bool"].values == [1.0]
    assert math.isnan(run.metrics["nan"].values[0]) and run.metrics["ninf"].values == [-math.inf]
    assert {r.removeprefix("not_a_number:") for r in rejected} == set(HOSTILE) - STORED


def test_surrogates_control_characters_and_huge_names_reach_the_store_encodable() -> None:
    bad = "loss\ud800\x00\x1b[31m"
    with capture() as cap:
        r = cap.reporter
        r.metrics({bad: 1.0, "ok": 2.0}, step=1)
        r.metric("tagged", 1.0, step=1, tags={"gpu\udfff": "0\ud800"})
        r.metrics({"x" * 10_000: 1.0, "ok": 3.0}, step=2)
        r.log("line \ud800 \x07 <script>alert(1)</script>", traceback="Traceback \udc80")
        attrs = {"k\ud800": "v\udc00", "n": 10**30, "obj": object()}
        r.event("user.event\ud800", attrs, body={"b": "\ud800"})
        r.checkpoint("/nowhere/\ud800", step=2, metadata={"metric": "loss\ud800", "value": 1.0})
        r.phase("train\ud800").end()
        r.failure(_BadStr(), flush=False)
        run = cap.load()
        for record in cap.logs:  # every record encodes as UTF-8, as OTLP and the store need
            json.dumps(record.log_record.body, default=str).encode("utf-8")
            str(record.log_record.body).encode("utf-8")
        rejected = cap.status()["rejected"]
    assert run.metrics["ok"].steps == [1, 2]
    assert any(name.startswith("loss\ufffd") for name in run.metrics)
    assert rejected["name_too_long"] == 1
    assert any("<script>" in line["message"] and "\ufffd" in line["message"] for line in run.logs)
    assert run.failure is not None and run.failure["type"] == "_BadStr"
    assert "could not be read" in run.failure["message"]
    for name in run.metrics:
        name.encode("utf-8")


def test_ten_thousand_distinct_names_are_capped_and_counted() -> None:
    with capture() as cap:
        for i in range(10_000):
            cap.reporter.metrics({f"m{i}": 1.0, "loss": 0.5}, step=i)
        cap.drain()
        rejected = cap.status()["rejected"]
        metrics = cap.status()["last_metrics"]
    assert len(metrics) == 1000 and "loss" in metrics
    assert rejected["too_many_names"] == 10_000 - 999  # loss is one of the 1000


def test_a_metric_without_a_step_takes_the_step_the_reporter_is_at() -> None:
    with capture() as cap:
        r = cap.reporter
        for step in range(1, 51):
            r.step_end(step, 0.01)
            r.metric("grad_norm", float(step))  # no step given
            r.metrics({"lr": float(step)})
        run = cap.load()
    assert run.metrics["grad_norm"].steps == list(range(1, 51))
    assert run.metrics["grad_norm"].values == [float(s) for s in range(1, 51)]
    assert run.metrics["lr"].steps == list(range(1, 51))


def test_threads_a_few_steps_out_of_order_are_not_rewinds_but_a_resume_is() -> None:
    with capture() as cap:
        r = cap.reporter
        for step in range(1, 400):  # a loader thread's metrics trail the training thread's by 0-5
            r.metrics({"loss": 1.0}, step=step)
            r.metrics({"data_wait": 0.1}, step=max(1, step - (step * 7) % 6))
        for step in range(100, 200):  # a deliberate resume from step 100
            r.metrics({"loss": 1.0}, step=step)
        cap.drain()
        rewinds = cap.events(Event.RUN_REWIND)
    assert len(rewinds) == 1
    assert rewinds[0].attributes["traincard.step"] == 100
