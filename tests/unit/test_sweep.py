"""Sweeps without a flow: a task's summary (final/best, hyperparameters, curve), folding and ordering
of hyperparameters, the Sweep section's limits, summaries beside stores (each writer's, merged into
the task's; an older store's one summary), and ``sweep()`` over stores written by the store writer."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._analysis.summary import CURVE_POINTS, curve_points, hyperparameter_value, task_summary
from traincard_otel._data.rundata import RunData, Series
from traincard_otel._read.card.render import render_comparison
from traincard_otel._read.load.summaries import StepFolder, read_summary
from traincard_otel._read.payload.sweep import LIVE_ROWS, fold, sweep_section
from traincard_otel._schema import Event
from traincard_otel._store.backends import LocalBackend
from traincard_otel._store.layout import SUMMARY_NAME
from traincard_otel._store.segment import metric_run
from traincard_otel._write.store.writer import StoreWriter

from tests.support.helpers import card_payload


def _run(values: list[float], name: str = "loss", hp: dict[str, str] | None = None) -> RunData:
    data = RunData(source="t")
    data.metrics[name] = Series(name=name, steps=list(range(1, len(values) + 1)), values=values)
    data.events.append({"time": 1.0, "name": Event.HYPERPARAMS, "body": hp or {}})
    data.states.append(
        {"status": "finished", "step": len(values), "started_at": 10.0, "heartbeat_at": 25.0, "attempt": 0}
    )
    return data


def test_a_summary_holds_the_final_and_best_values_and_a_short_curve() -> None:
    values = [3.0, 1.0, math.nan, 2.0] + [2.5] * 1000
    s = task_summary(_run(values, hp={"lr": "0.01", "layers": "4", "opt": "adam", "amp": "True"}), None)
    loss = s["metrics"]["loss"]
    assert (loss["last"], loss["last_step"], loss["best"], loss["best_step"]) == (2.5, 1004, 1.0, 2)
    assert s["hyperparameters"] == {"lr": 0.01, "layers": 4, "opt": "adam", "amp": True}
    assert s["main"] == "loss" and s["higher_is_better"] is False
    assert s["status"] == "finished" and s["duration_s"] == 15.0
    points = curve_points(s["curve"])
    assert 0 < len(points) <= CURVE_POINTS and points[-1] == [1004.0, 2.5] and points[0][0] == 15.0
    acc = task_summary(_run([0.2, 0.9, 0.5], name="eval_accuracy"), None)["metrics"]["eval_accuracy"]
    assert (acc["best"], acc["last"]) == (0.9, 0.5)  # higher is better for an accuracy
    json.dumps(s, allow_nan=False)  # what a writer stores


def test_later_hyperparameters_win_and_text_stays_text() -> None:
    data = _run([1.0], hp={"lr": "0.1"})
    data.events.append({"time": 2.0, "name": Event.HYPERPARAMS, "body": {"lr": "0.2", "note": "1e-3x"}})
    assert task_summary(data, None)["hyperparameters"] == {"lr": 0.2, "note": "1e-3x"}
    assert hyperparameter_value("nan") == "nan" and hyperparameter_value("-3") == -3


def test_constant_hyperparameters_fold_and_the_varying_come_most_distinct_first() -> None:
    branches = [
        {"lr": 0.1, "wd": 0.0, "seed": 1, "model": "gpt2"},
        {"lr": 0.2, "wd": 0.0, "seed": 2, "model": "gpt2"},
        {"lr": 0.3, "wd": 0.1, "seed": 2, "model": "gpt2"},
    ]
    varying, constant = fold(branches)
    assert constant == {"model": "gpt2"}
    assert varying == ["lr", "seed", "wd"]  # three values, then two each, by name
    varying, constant = fold([{"a": 1}, {"a": 1, "b": 2}])
    assert constant == {"a": 1} and varying == ["b"]  # one branch lacks b: it varies


def _summary(task: str, best: float, status: str = "finished", lr: float = 0.1) -> dict[str, object]:
    return {
        "pathspec": f"F/1/train/{task}",
        "status": status,
        "step": 10,
        "hyperparameters": {"lr": lr, "model": "tiny"},
        "metrics": {
            "loss": {"last": best + 0.1, "best": best, "best_step": 5, "last_step": 10, "points": 10}
        },
        "main": "loss",
        "higher_is_better": False,
        "curve": [[1.0, best + 1], [10.0, best + 0.1]],
    }


def test_the_section_marks_the_best_keeps_a_failed_branch_and_folds_constants() -> None:
    summaries = {
        "1": _summary("1", 0.5, lr=0.1),
        "2": _summary("2", 0.3, lr=0.2),
        "3": _summary("3", 0.9, "failed", 0.3),
    }
    summaries["3"]["failure"] = "RuntimeError: diverged"
    section = sweep_section(summaries, title="F/1/train", own="F/1/train/1")
    assert [r["id"] for r in section["rows"]] == ["2", "1", "3"] and section["best"] == "2"
    assert section["rows"][0]["is_best"] and section["rows"][1]["self"]
    assert (
        section["rows"][2]["status"] == "failed" and section["rows"][2]["failure"] == "RuntimeError: diverged"
    )
    assert section["constant"] == {"model": "tiny"} and section["varying"] == ["lr"]
    assert all("model" not in r["hp"] for r in section["rows"])
    assert [c["best"] for c in section["curves"]] == [True, False, False]


def test_a_live_section_keeps_the_best_rows_and_its_own_and_counts_the_rest() -> None:
    summaries = {str(i): _summary(str(i), float(i), lr=i / 100) for i in range(200)}
    section = sweep_section(summaries, title="t", own="F/1/train/199", live=True)
    ids = [r["id"] for r in section["rows"]]
    assert len(ids) == LIVE_ROWS + 1 and ids[-1] == "199" and ids[0] == "0"
    assert section["hidden_rows"] == 200 - LIVE_ROWS - 1 and section["total"] == 200
    assert section["hidden_curves"] == 200 - len(section["curves"]) > 0


def _old_summary(backend: LocalBackend, summary: dict[str, object]) -> None:
    """A task's summary as stores written before each writer kept its own have it."""
    backend.write(SUMMARY_NAME, json.dumps(summary).encode())


def test_summaries_of_a_step_are_read_beside_each_task(tmp_path: Path) -> None:
    step = tmp_path / "F" / "1" / "train"
    for task in ("4", "5"):
        _old_summary(
            LocalBackend(step / task / "traincard"), {"pathspec": f"F/1/train/{task}", "step": int(task)}
        )
    writer = StoreWriter(LocalBackend(step / "6" / "traincard"), attempt=0, rank=0)  # a writer's own
    writer.set_summary(
        {"pathspec": "F/1/train/6", "step": 6, "writer": writer.writer_id, "status": "running"}
    )
    assert writer.flush_now()
    (step / "7" / "traincard").mkdir(parents=True)  # a task that wrote no summary (yet)
    folder = StepFolder(LocalBackend(step / "4" / "traincard"))
    assert folder.task_ids() == ["4", "5", "6", "7"]
    assert {k: v["step"] for k, v in folder.summaries().items()} == {"4": 4, "5": 5, "6": 6}
    assert read_summary(LocalBackend(step / "7" / "traincard")) is None
    read: list[list[str]] = []
    folder.backend.read_many = lambda names: read.append(list(names)) or {}  # type: ignore[method-assign]
    assert {k: v["step"] for k, v in folder.summaries().items()} == {"4": 4, "5": 5, "6": 6}
    assert read == []  # nothing changed: nothing read again


def _store(folder: Path, lr: float, losses: list[float]) -> None:
    writer = StoreWriter(LocalBackend(folder), attempt=0, rank=0)
    now = time.time()
    steps = list(range(1, len(losses) + 1))
    writer.add_many(
        [
            {"k": "e", "t": now, "n": Event.HYPERPARAMS, "b": {"lr": str(lr)}},
            metric_run("train", ["loss"], steps, [now + s for s in steps], losses),
        ]
    )
    writer.set_state({"status": "finished", "step": len(losses), "started_at": now, "heartbeat_at": now + 5})
    assert writer.flush_now()


def test_sweep_over_stores_without_summaries_reads_them_whole(tmp_path: Path) -> None:
    _store(tmp_path / "a", 0.1, [2.0, 1.0, 1.5])
    _store(tmp_path / "b", 0.3, [2.0, 0.5, 0.7])
    sw = traincard_otel.sweep([str(tmp_path / "a"), str(tmp_path / "b")])
    rows = sw.to_rows()
    assert [(r["lr"], r["loss.best"], r["loss.final"], r["status"]) for r in rows] == [
        (0.1, 1.0, 1.5, "finished"),
        (0.3, 0.5, 0.7, "finished"),
    ]
    assert [run.metrics["loss"].values[-1] for run in sw.runs] == [1.5, 0.7]
    pd = pytest.importorskip("pandas")
    frame = sw.to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame["lr"]) == [0.1, 0.3]
    pytest.importorskip("pyarrow")
    assert sw.to_arrow().column("loss.best").to_pylist() == [1.0, 0.5]
    payload = card_payload(render_comparison(sw.summaries, sw.title))
    section = payload["sweep"]
    assert section["standalone"] and section["total"] == 2 and section["varying"] == ["lr"]
    assert section["best"] == section["rows"][0]["id"] and section["rows"][0]["hp"] == {"lr": 0.3}


class _Schedule(enum.Enum):
    LINEAR = "linear"
    COSINE = "cosine"


@dataclasses.dataclass
class _Arguments:  # shaped like transformers.TrainingArguments (importing it takes seconds)
    output_dir: str = "out"
    learning_rate: float = 5e-5
    max_steps: int = -1
    lr_scheduler_type: _Schedule = _Schedule.LINEAR
    disable_tqdm: bool | None = None  # None, then resolved by __post_init__
    report_to: list[str] = dataclasses.field(default_factory=list)
    _private: int = 0


def test_changed_training_arguments_are_the_hyperparameters() -> None:
    from traincard_otel.adapters._arguments import changed_arguments

    args = _Arguments(output_dir="elsewhere", learning_rate=3e-4, lr_scheduler_type=_Schedule.COSINE)
    args.disable_tqdm, args._private = False, 3
    assert changed_arguments(args) == {"learning_rate": 3e-4, "lr_scheduler_type": "cosine"}


def test_a_live_branch_reads_its_siblings_of_the_same_split(tmp_path: Path) -> None:
    from traincard_otel._analysis.analysis import analyse
    from traincard_otel._read.locate import Located
    from traincard_otel._read.render import _compared, _sweep_section
    from traincard_otel.metaflow.live_sweep import LiveSweep

    step = tmp_path / "F" / "1" / "train"
    position = {"split": "start", "parent": "", "index": 0, "num_splits": 3, "step": "train"}
    other_split = dict(position, parent="outer:1")  # a nested foreach's other branch: no sibling
    for task, where, values in (
        ("4", position, [2.0, 1.0]),
        ("5", position, [2.0, 0.5]),
        ("6", other_split, [0.1]),
    ):
        summary = task_summary(_run(values, hp={"lr": task}), None, pathspec=f"F/1/train/{task}", sweep=where)
        writer = StoreWriter(LocalBackend(step / task / "traincard"), attempt=0, rank=0)
        writer.set_summary({**summary, "writer": writer.writer_id, "attempt": 0, "rank": 0})
        assert writer.flush_now()
    own = _run([2.0, 1.0, 0.2], hp={"lr": "4"})  # what its refresher read: fresher than its summary
    live = LiveSweep(LocalBackend(step / "4" / "traincard"), "F/1/train/4", position=position)
    section = live.update(own, analyse(own))
    assert section is not None and sorted(r["id"] for r in section["rows"]) == ["4", "5"]
    assert section["best"] == "4" and [r["id"] for r in section["rows"] if r["self"]] == ["4"]
    assert live.update(own, analyse(own)) is section  # nothing due: the same section, nothing read
    before = sorted(p.name for p in step.rglob("*"))
    assert live.update(own, analyse(own), force=True) is not section
    assert sorted(p.name for p in step.rglob("*")) == before  # a reader writes nothing
    compared = _compared(Located(LocalBackend(step / "5" / "traincard"), "5", None))
    final = _sweep_section(compared, standalone=False, live=False)
    assert final is not None and final["total"] == 2 and final["rows"][0]["self"]
    # A branch whose writers wrote nothing yet is listed where it sits, with nothing to compare.
    early = LiveSweep(LocalBackend(step / "8" / "traincard"), "F/1/train/8", position=position)
    rows = (early.update(RunData(source="e"), analyse(RunData(source="e"))) or {"rows": []})["rows"]
    assert sorted(r["id"] for r in rows) == ["4", "5", "8"]

    join = LiveSweep(
        LocalBackend(tmp_path / "F" / "1" / "join" / "9" / "traincard"),
        "F/1/join/9",
        joins=["F/1/train/4", "F/1/train/5"],
    )
    joined = join.update(RunData(source="j"), analyse(RunData(source="j")), force=True)
    assert joined is not None and sorted(r["id"] for r in joined["rows"]) == ["4", "5"]
    assert not any(r["self"] for r in joined["rows"])


def test_a_branch_input_and_the_flow_parameters_are_hyperparameters() -> None:
    import types

    pytest.importorskip("metaflow")
    from traincard_otel.metaflow.decorator import _flow_hyperparameters, _foreach_position

    frame = types.SimpleNamespace(step="start", var="configs", num_splits=4, index=2)
    outer = types.SimpleNamespace(step="grid", var="models", num_splits=2, index=1)
    flow = types.SimpleNamespace(_foreach_stack=[outer, frame], input={"lr": 0.1, "optimizer": "adam"})
    assert _flow_hyperparameters(flow) == {"lr": 0.1, "optimizer": "adam"}
    flow.input = 0.3
    assert _flow_hyperparameters(flow) == {"configs": 0.3}
    flow.input = {"nested": {"lr": 1}}  # not flat: no hyperparameter
    assert _flow_hyperparameters(flow) == {}
    position = _foreach_position(flow, "train")
    assert position is not None and position.as_dict() == {
        "split": "start",
        "parent": "grid:1",
        "index": 2,
        "num_splits": 4,
        "step": "train",
    }
    assert _foreach_position(types.SimpleNamespace(_foreach_stack=[]), "train") is None
