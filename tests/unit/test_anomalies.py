"""Anomaly rules: each rule on its own, their configuration, and the converter's wiring.

Planted anomalies in real training loops (a corrupted batch, a NaN input) report through a real
pipeline (``traincard_otel.testing.capture``); a healthy HF run is in tests/integration.
"""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest

from traincard_otel._analysis.anomalies import AnomalyDetector, AnomalyRules, direction, role
from traincard_otel._config import resolve
from traincard_otel._schema import Attr, Event
from traincard_otel._write.convert.anomalies import AnomalyWatch, parse_rules
from traincard_otel._write.convert.columns import MetricRun
from traincard_otel.exceptions import ConfigError
from traincard_otel.testing import capture


def _noisy_decay(n: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [2.0 * math.exp(-i / 150) + 0.3 + rng.gauss(0, 0.05) for i in range(n)]


def test_names_say_which_rule_watches_them_and_which_way_is_better() -> None:
    assert [direction(n) for n in ("eval_loss", "val/acc_top1", "test-f1", "eval_accuracy", "eval_wer")] == [
        -1,
        1,
        1,
        1,
        -1,
    ]
    assert direction("eval_runtime") is None and direction("eval_samples_per_second") is None
    assert [role(n) for n in ("loss", "train/loss", "grad_norm", "gradient-norm", "learning_rate")] == [
        "loss",
        "loss",
        "grad",
        "grad",
        "none",
    ]
    assert role("eval_loss") == "eval" and role("val_acc") == "eval" and role("eval_runtime") == "none"
    # outside training a loss is judged for NaN/inf only: an eval or inference loop's batches differ
    assert role("loss", phase="eval") == "finite" and role("loss", phase="train") == "loss"
    assert role("accuracy", phase="eval") == "none" and role("eval_accuracy", phase="eval") == "eval"


def test_a_healthy_noisy_decaying_loss_raises_nothing() -> None:
    d = AnomalyDetector()
    found = [a for i, v in enumerate(_noisy_decay(2000)) for a in d.observe(i, "loss", v)]
    assert found == []


def test_a_loss_spike_is_caught_once_with_its_step_and_explanation() -> None:
    d = AnomalyDetector()
    values = _noisy_decay(300)
    values[200:204] = [v * 4 for v in values[200:204]]  # a bad stretch of four steps
    found = [a for i, v in enumerate(values) for a in d.observe(i, "loss", v)]
    assert [(a.kind, a.step, a.name) for a in found] == [("loss_spike", 200, "loss")]
    a = found[0]
    assert a.value == values[200] and a.expected is not None and a.expected < a.value / 3
    assert (
        a.message.startswith(f"loss {a.value:.4g} at step 200 is ") and "MADs above the median" in a.message
    )


def test_no_verdict_before_min_points_and_a_plateau_needs_a_real_jump() -> None:
    d = AnomalyDetector(AnomalyRules(min_points=20))
    assert [a for i in range(19) for a in d.observe(i, "loss", 1.0 if i < 18 else 50.0)] == []
    flat = AnomalyDetector()
    # a plateau has a MAD of zero: a 5 % wiggle is not a spike, a doubling is
    assert [a for i in range(30) for a in flat.observe(i, "loss", 1.0)] == []
    assert flat.observe(30, "loss", 1.05) == []
    assert [a.kind for a in flat.observe(31, "loss", 2.0)] == ["loss_spike"]


def test_nan_and_inf_are_flagged_when_they_start_and_again_after_a_finite_value() -> None:
    d = AnomalyDetector()
    assert [a.kind for a in d.observe(1, "loss", math.nan, phase="infer")] == ["nan"]
    assert [
        a for i in range(2, 60) for a in d.observe(i, "loss", 1.0 if i % 2 else 50.0, phase="infer")
    ] == []
    seq = [1.0, math.nan, math.nan, 1.0, math.inf]
    found = [a for i, v in enumerate(seq) for a in d.observe(i, "grad_norm", v)]
    assert [(a.kind, a.step, a.name) for a in found] == [
        ("nan", 1, "grad_norm"),
        ("nan", 4, "grad_norm"),
    ]
    assert [a.message for a in found] == ["grad_norm is nan at step 1", "grad_norm is inf at step 4"]


def test_an_exploding_grad_norm_is_caught() -> None:
    d = AnomalyDetector()
    rng = random.Random(1)
    found = [a for i in range(100) for a in d.observe(i, "grad_norm", 1.0 + rng.random())]
    assert found == []
    (a,) = d.observe(100, "grad_norm", 40.0)
    assert a.kind == "grad_explosion" and a.step == 100 and "x the median of the last 50 values" in a.message


def test_a_throughput_drop_needs_consecutive_slow_steps_and_is_flagged_once() -> None:
    d = AnomalyDetector(AnomalyRules(throughput_steps=5))
    rng = random.Random(2)
    for s in range(60):
        assert d.observe_step(s, 0.1 * (1 + 0.2 * rng.random()), tokens=512) == []
    # four slow steps then a normal one: not a drop
    assert [a for s in range(60, 64) for a in d.observe_step(s, 0.5, tokens=512)] == []
    assert d.observe_step(64, 0.1, tokens=512) == []
    found = [a for s in range(65, 90) for a in d.observe_step(s, 0.5, tokens=512)]
    assert [(a.kind, a.step, a.name) for a in found] == [("throughput_drop", 69, "tokens/s")]
    assert "for 5 steps since step 65" in found[0].message
    assert found[0].value == pytest.approx(1024) and found[0].expected == pytest.approx(4700, rel=0.1)


def test_an_eval_regression_is_judged_against_the_best_in_the_right_direction() -> None:
    d = AnomalyDetector()
    losses = [(100, 2.0), (200, 1.5), (300, 1.52), (400, 1.7), (500, 1.8), (600, 1.4), (700, 1.6)]
    found = [a for s, v in losses for a in d.observe(s, "eval_loss", v)]
    assert [(a.step, a.expected) for a in found] == [(400, 1.5), (700, 1.4)]  # once per best
    assert found[0].message == "eval_loss 1.7 at step 400 is 13% worse than the best, 1.5 at step 200"
    acc = [a for s, v in [(1, 0.8), (2, 0.9), (3, 0.88), (4, 0.8)] for a in d.observe(s, "eval_acc", v)]
    assert [(a.kind, a.step) for a in acc] == [("eval_regression", 4)]


def test_rules_come_from_the_setting_and_bad_ones_fail_loudly_at_start() -> None:
    assert parse_rules(resolve(environ={}).anomalies) == AnomalyRules()
    assert parse_rules(resolve(environ={"TRAINCARD_ANOMALIES": "off"}).anomalies) is None
    assert parse_rules(
        resolve({"anomalies": "spike_mads=8, window=100"}, environ={"TRAINCARD_ANOMALIES": "off"}).anomalies
    ) == AnomalyRules(spike_mads=8.0, window=100)  # the argument beats the variable
    for bad, said in (
        ("spike=3", "field among window, min_points"),
        ("window=lots", "window='lots' is not a number"),
        ("throughput_fraction=2", "throughput_fraction must be between 0 and 1"),
        ("min_points=90", "min_points <= window"),
    ):
        with pytest.raises(ConfigError, match=said):
            parse_rules(bad)
    with pytest.raises(ConfigError, match="TRAINCARD_ANOMALIES: 'spike=3'"), capture(anomalies="spike=3"):
        pass


def test_the_watch_counts_each_anomaly_by_kind_on_its_counter() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    emitted: list[tuple[str, object]] = []
    watch = AnomalyWatch(lambda t, e, b, a: emitted.append((e, b)), meter, AnomalyRules())
    values = [1.0 + 0.01 * (i % 3) for i in range(30)] + [5.0, math.nan]
    run = MetricRun(None, ("lr", "loss"), None)
    for i, v in enumerate(values):
        run.add(float(i), i, (1e-3, v))
    watch.metric_runs([run])  # the typed rows, as the row batcher hands them over after emitting
    assert [e for e, _b in emitted] == [Event.ANOMALY, Event.ANOMALY]
    data = reader.get_metrics_data()
    (point,) = [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "traincard.anomalies"
        for p in m.data.data_points
        if p.attributes[Attr.ANOMALY_KIND] == "loss_spike"
    ]
    assert point.value == 1
    # every kind's series is there from the start, at 0 when nothing was flagged
    kinds = {
        p.attributes[Attr.ANOMALY_KIND]: p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "traincard.anomalies"
        for p in m.data.data_points
    }
    assert kinds == {
        "loss_spike": 1,
        "nan": 1,
        "grad_explosion": 0,
        "throughput_drop": 0,
        "eval_regression": 0,
        "reward_collapse": 0,
        "kl_blowup": 0,
    }


def _train(steps: int, plant: dict[int, str], reporter: object) -> list[float]:
    """A real regression loop; ``plant``: step -> "spike" (a batch with corrupted targets) or "nan"."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(1024, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(1024, 1)
    losses = []
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        idx = torch.randint(0, 1024, (64,))
        xb, yb = x[idx].clone(), y[idx].clone()
        if plant.get(step) == "spike":
            yb = yb * 30  # a corrupted batch
        elif plant.get(step) == "nan":
            xb[0, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        if plant.get(step) is None:
            opt.step()  # a poisoned batch is skipped, as a guarded loop does
        reporter.metrics({"loss": loss.detach(), "grad_norm": grad_norm}, step=step)  # type: ignore[attr-defined]
        reporter.step_end(step, duration_s=time.perf_counter() - t0, samples=64)  # type: ignore[attr-defined]
        losses.append(float(loss.detach()))
    return losses


def test_a_planted_loss_spike_and_nan_in_a_real_loop_become_events_in_the_store() -> None:
    pytest.importorskip("torch")
    with capture() as cap:
        losses = _train(160, {120: "spike", 140: "nan"}, cap.reporter)
        run = cap.load()
    anomalies = [e for e in run.events if e["name"] == Event.ANOMALY]
    got = sorted(
        (e["attributes"][Attr.STEP], e["attributes"][Attr.ANOMALY_KIND], e["attributes"][Attr.METRIC_NAME])
        for e in anomalies
    )
    assert (120, "loss_spike", "loss") in got, (got, losses[110:125])
    assert (140, "nan", "loss") in got and (140, "nan", "grad_norm") in got
    # no loss or gradient verdict where nothing was planted (throughput is the shared machine's)
    assert {s for s, k, _n in got if k != "throughput_drop"} <= {120, 140}, got
    spike = next(e for e in anomalies if e["attributes"][Attr.ANOMALY_KIND] == "loss_spike")
    assert spike["body"].startswith("loss ") and "at step 120" in spike["body"]
    loss_at = dict(zip(run.metrics["loss"].steps, run.metrics["loss"].times, strict=True))
    assert spike["time"] == loss_at[120]


def test_anomalies_off_leaves_the_rows_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("TRAINCARD_ANOMALIES", "off")
    with capture() as cap:
        _train(140, {120: "spike"}, cap.reporter)
        run = cap.load()
    assert [e for e in run.events if e["name"] == Event.ANOMALY] == []
    assert len(run.metrics["loss"]) == 140


@pytest.mark.parametrize("seed", range(8))
def test_a_stretch_of_step_ends_is_judged_as_each_step_end_would_be(seed: int) -> None:
    """observe_steps (a stretch in one pass where none can be slow) finds what observe_step
    finds a step at a time: drops, their ends, untimed steps, a measure that changes."""
    rng = random.Random(seed)
    steps: list[int] = []
    durations: list[float] = []
    tokens: list[int] = []
    samples: list[int] = []
    for step in range(1, 3001):
        slow = 300 < step % 400 < 340  # a drop to a third, then back
        d = rng.uniform(0.009, 0.011) * (3.0 if slow else 1.0)
        if step == 2500:
            d = math.nan  # not timed
        steps.append(step)
        durations.append(d)
        tokens.append(0 if 1500 < step < 1700 else 4096)  # no tokens counted for a while: steps/s
        samples.append(8 if 1500 < step < 1600 else 0)
    one, stretches = AnomalyDetector(), AnomalyDetector()
    expected = [
        (i, a)
        for i in range(len(steps))
        for a in one.observe_step(steps[i], durations[i], tokens[i], samples[i])
    ]
    # drains of any size, and some from the end of a slow stretch to the start of the next
    cuts = {
        0,
        len(steps),
        *(rng.randint(1, len(steps) - 1) for _ in range(20)),
        *range(339, len(steps), 400),
        *range(300, len(steps), 400),
    }
    got: list[tuple[int, object]] = []
    for lo, hi in itertools.pairwise(sorted(cuts)):
        found = stretches.observe_steps(steps[lo:hi], durations[lo:hi], tokens[lo:hi], samples[lo:hi])
        got += [(lo + i, a) for i, a in found]
    assert got == expected
    assert len(expected) >= 6  # the drops were found (tokens/s, samples/s, steps/s)
    assert stretches.counts == one.counts
