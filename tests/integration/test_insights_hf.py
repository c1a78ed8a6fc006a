"""Insights on a real transformers.Trainer run of the tiny GPT-2 (CPU): what a healthy run shows."""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._read.payload.insights import insights_section
from traincard_otel._schema import Attr, Event

pytest.importorskip("transformers")


@pytest.mark.slow
def test_a_healthy_run_raises_no_anomaly(store_dir: Path, tmp_path: Path) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=120, logging_steps=1, eval_steps=20, save_steps=1000
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert len(run.metrics["loss"]) == 120 and len(run.metrics["grad_norm"]) == 120
    assert len(run.metrics["eval_loss"]) == 6
    found = [
        (e["attributes"][Attr.ANOMALY_KIND], e["attributes"][Attr.STEP], e["body"])
        for e in run.events
        if e["name"] == Event.ANOMALY
    ]
    # A healthy run raises no anomaly from what it learns. Its throughput is the machine's: when a
    # neighbour takes the cores for a while the drop is real, and then the rule must say so truly.
    assert [f for f in found if f[0] != "throughput_drop"] == []
    durations = dict(zip(run.step_times[0].steps, run.step_times[0].values, strict=True))
    for _kind, step, body in (f for f in found if f[0] == "throughput_drop"):
        since = int(re.search(r"since step (\d+)", str(body)).group(1))  # type: ignore[union-attr]
        before = statistics.median(durations[s] for s in range(max(1, since - 50), since) if s in durations)
        during = statistics.median(durations[s] for s in range(since, step + 1) if s in durations)
        assert during > 1.5 * before, (body, before, during)

    # the adapter's model FLOPs: 6 x 108,288 parameters, attention 12 x 2 layers x 64 per position
    progress = run.status["progress"]
    assert progress["flops_per_token"] == 6 * 108_288 and progress["attention_flops_per_position"] == 1536
    assert progress["compute_dtype"] == "fp32" and progress["peak_flops"] is None  # a CPU: unknown peak
    e = insights_section(run, analyse(run))["efficiency"]
    assert e["seq_len"] == 32 and e["flops_per_token"] == 6 * 108_288 + 1536 * 32
    tokens = run.throughput["tokens_per_second{rank=0}"]
    assert e["achieved_flops"] == pytest.approx(e["flops_per_token"] * statistics.median(tokens.values[-50:]))
    assert e["mfu"] is None and "no GPU" in e["peak_source"]


@pytest.mark.slow
def test_goodput_of_a_run_with_slow_data_loading_shows_the_data_wait(store_dir: Path, tmp_path: Path) -> None:

    from examples.tiny_gpt2 import ProgressionDataset
    from examples.tiny_gpt2 import trainer as make_trainer

    class SlowDataset(ProgressionDataset):
        def __getitem__(self, i: int) -> dict[str, object]:
            time.sleep(0.025)  # 100 ms per batch of 4
            return super().__getitem__(i)

    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=30, logging_steps=5, per_device_train_batch_size=4, eval_steps=15
    )
    trainer.train_dataset = SlowDataset(256)
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    g = run.goodput
    assert g is not None and not g.running and g.attempts == 1
    s = g.seconds
    assert set(s) == {
        "productive",
        "data_wait",
        "startup",
        "eval",
        "checkpoint",
        "stall",
        "restart",
        "shutdown",
        "other",
    }
    assert sum(s.values()) == pytest.approx(g.wall_s)
    # 30 batches of 4 at >= 25 ms an item: at least 3 s waited, the largest share of the run
    assert s["data_wait"] >= 30 * 4 * 0.025
    assert s["data_wait"] == pytest.approx(run.data_wait_total[0])
    assert s["data_wait"] > s["productive"] and s["data_wait"] / g.wall_s > 0.4
    evals = [p for p in run.phases if p["n"] == "training.eval"]
    assert s["eval"] == pytest.approx(sum(p["t1"] - p["t0"] for p in evals))
    assert s["restart"] == 0 and s["stall"] == 0
    steps = run.step_times[0]
    assert s["startup"] == pytest.approx(steps.times[0] - steps.values[0] - run.states[0]["started_at"])
    assert s["other"] < 0.1 * g.wall_s


@pytest.mark.slow
def test_goodput_of_a_retried_run_counts_what_the_retry_recomputes(store_dir: Path, tmp_path: Path) -> None:
    """Attempt 0 trains to step 30 and dies; attempt 1 resumes from the checkpoint at step 15."""
    from examples.tiny_gpt2 import trainer as make_trainer

    out = str(tmp_path / "out")
    first = make_trainer(out, max_steps=30, logging_steps=5, eval_steps=100, save_steps=15)
    traincard_otel.instrument(first)
    first.train()
    traincard_otel.shutdown()

    traincard_otel.configure(attempt=1)
    second = make_trainer(out, max_steps=45, logging_steps=5, eval_steps=100, save_steps=15)
    traincard_otel.instrument(second)
    second.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-15"))
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    g = run.goodput
    assert g is not None and g.attempts == 2
    steps = run.step_times[0]
    again = [
        d
        for s, d, a in zip(steps.steps, steps.values, steps.attempts, strict=True)
        if a == 1 and s is not None and s <= 30
    ]
    assert len(again) == 15  # steps 16..30, run twice
    waited = run.data_wait_total[0] / sum(steps.values)
    # the redone steps' compute, the gap between the attempts and attempt 1's start-up
    state = {s["attempt"]: s for s in run.states}
    gap = state[1]["started_at"] - state[0]["updated_at"]
    first = steps.attempts.index(1)
    head = steps.times[first] - steps.values[first] - state[1]["started_at"]
    assert g.seconds["restart"] >= sum(again) * (1 - waited) + max(gap, 0) + head - 0.05
    assert g.seconds["restart"] > 0.2 * g.seconds["productive"]
    assert sum(g.seconds.values()) == pytest.approx(g.wall_s)
