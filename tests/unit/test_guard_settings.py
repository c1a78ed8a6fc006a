"""stop_on and notify: settings checked at start, URLs never shown, the guard's rules, the notifier."""

from __future__ import annotations

import time
from typing import Any

import pytest

import traincard_otel
from benchmarks._webhooks import receiver
from traincard_otel._config import NOTIFY_KINDS, STOP_KINDS, Settings, resolve
from traincard_otel._schema import Attr, Event
from traincard_otel._write.pipeline.guards import Guards, notified_kinds
from traincard_otel._write.pipeline.notify import Notifier
from traincard_otel.exceptions import ConfigError

SECRET = "https://hooks.example.com/services/T000/B000/very-secret"


def test_an_unknown_kind_is_an_error_at_start_naming_the_valid_kinds() -> None:
    with pytest.raises(ConfigError) as err:
        resolve(environ={"TRAINCARD_STOP_ON": "nan, nans"})
    assert "nans" in str(err.value) and all(k in str(err.value) for k in STOP_KINDS)
    with pytest.raises(ConfigError, match="bogus"):
        traincard_otel.configure(stop_on=["nan", "bogus"], store="off")
    with pytest.raises(ConfigError, match="rank_hung"):
        resolve(environ={"TRAINCARD_NOTIFY_ON": "failure,hung"})
    assert resolve({"stop_on": ["NaN", "stall"]}).stop_on == ("nan", "stall")
    assert resolve(environ={"TRAINCARD_NOTIFY_ON": "failure,run_end"}).notify_on == ("failure", "run_end")
    assert set(STOP_KINDS) < set(NOTIFY_KINDS)


def test_webhook_urls_are_never_shown() -> None:
    with pytest.raises(ConfigError) as err:
        resolve(environ={"TRAINCARD_NOTIFY": f"{SECRET},hooks.example.com/secret-two"})
    assert "entry 2 of 2" in str(err.value) and "secret" not in str(err.value)
    settings = resolve(environ={"TRAINCARD_NOTIFY": SECRET})
    assert settings.notify == (SECRET,) and SECRET not in repr(settings)
    traincard_otel.configure(notify=SECRET, store="off", system=False)
    with pytest.raises(ConfigError) as err:
        traincard_otel.configure(notify=SECRET + "-other")
    assert "secret" not in str(err.value) and "redacted" in str(err.value)


def _guards(stop_on: tuple[str, ...], notifier: Notifier | None = None) -> tuple[Guards, list[Any]]:
    emitted: list[Any] = []
    guards = Guards(
        Settings(stop_on=stop_on),
        emit=lambda name, attrs: emitted.append((name, dict(attrs))),
        notifier=notifier,
        rank=0,
        run="Flow/1/train/2",
        card="Flow/1/train/2",
    )
    return guards, emitted


def test_a_named_anomaly_trips_the_guard_once_and_the_run_ends_stopped_early() -> None:
    guards, emitted = _guards(("nan", "stall"))
    spike = {Attr.ANOMALY_KIND: "loss_spike", Attr.STEP: 3, Attr.ANOMALY_VALUE: 9.0}
    guards.observe(1.0, Event.ANOMALY, "loss spiked", spike)
    assert guards.trigger is None and guards.end_status("finished") == "finished"
    nan = {Attr.ANOMALY_KIND: "nan", Attr.STEP: 5, Attr.ANOMALY_VALUE: float("nan")}
    guards.observe(2.0, Event.ANOMALY, "loss is NaN", nan)
    guards.observe(3.0, Event.STALL_STARTED, None, {Attr.STEP: 6})  # the first trigger stays
    assert guards.trigger is not None and (guards.trigger.kind, guards.trigger.step) == ("nan", 5)
    assert [name for name, _ in emitted] == [Event.GUARD_STOP_REQUESTED]
    guards.checkpointed("ckpt/step-6", 6)
    guards.checkpointed("ckpt/step-9", 9)  # only the first after the trip is the stop's
    assert guards.end_status("finished") == "stopped_early"
    assert guards.end_status("failed") == "failed" and guards.end_status("terminated") == "terminated"
    attrs = guards.ended("stopped_early", 6)
    assert attrs[Attr.CHECKPOINT_PATH] == "ckpt/step-6" and attrs[Attr.GUARD_TRIGGER_STEP] == 5
    assert [a["action"] for a in guards.status_fields()["actions"]] == [  # type: ignore[union-attr]
        "stop requested",
        "checkpoint saved",
        "stopped early",
    ]


def test_notices_are_rate_limited_per_kind_narrowed_by_notify_on_and_name_the_rank() -> None:
    with receiver() as hook:
        notifier = Notifier([hook.url], frozenset({"nan", "failure", "rank_lost", "run_end"}), timeout_s=2.0)
        guards, _ = _guards((), notifier)
        for step in (1, 2, 3):  # one divergence, three events: one notice
            guards.observe(1.0, Event.ANOMALY, "NaN", {Attr.ANOMALY_KIND: "nan", Attr.STEP: step})
        guards.observe(1.0, Event.ANOMALY, "spike", {Attr.ANOMALY_KIND: "loss_spike", Attr.STEP: 4})
        guards.observe(1.0, Event.GANG_FIRST_FAILURE, None, {Attr.RANK: 3, Attr.STEP: 7})
        guards.rank_ended(3, 7, "exited with 1")  # the same rank's failure, seen again
        guards.observe(1.0, Event.RANK_LOST, None, {Attr.LOST_RANK: 2, Attr.STEP: 6})
        guards.observe(1.0, Event.GANG_RANK_HUNG, None, {Attr.RANK: 2, Attr.STEP: 6})  # not in notify_on
        guards.ended("finished", 8)
        assert notifier.close(5.0)
        assert sorted(hook.kinds()) == ["failure", "nan", "rank_lost", "run_end"]
        assert hook.wait_for("rank_lost")["rank"] == 2
        failure = hook.wait_for("failure")
        assert failure["rank"] == 3 and failure["run"] == "Flow/1/train/2" and "rank 3" in failure["text"]
        assert notifier.status()["suppressed"] == 2 and notifier.status()["sent"] == 4


def test_a_refusing_webhook_is_counted_and_never_raises() -> None:
    notifier = Notifier(["http://127.0.0.1:9/refused"], None, timeout_s=1.0)
    assert notifier.notify("failure", "boom", {"step": 1})
    t0 = time.monotonic()
    notifier.close(3.0)
    assert time.monotonic() - t0 < 3.5
    assert notifier.status()["failed"] == 1 and "refused" not in str(notifier.status())


def test_the_step_decorator_refuses_an_unknown_kind_before_the_run_starts() -> None:
    pytest.importorskip("metaflow")
    from traincard_otel.metaflow.decorator import TraincardDecorator

    deco = TraincardDecorator(attributes={"stop_on": "nan,spikes", "attach_card": False})
    with pytest.raises(ConfigError, match="spikes"):
        deco.step_init(None, None, "train", [], None, None, None)
    TraincardDecorator(attributes={"stop_on": "nan", "attach_card": False}).step_init(
        None, None, "train", [], None, None, None
    )


def test_a_rank_started_by_a_gang_node_sends_only_what_it_alone_sees() -> None:
    settings = Settings(notify_on=("nan", "failure", "stopped_early"))
    assert notified_kinds(settings, under_launcher=False) == {"nan", "failure", "stopped_early"}
    assert notified_kinds(settings, under_launcher=True) == {"nan", "stopped_early"}
    assert notified_kinds(Settings(), under_launcher=False) is None
    assert "run_end" not in notified_kinds(Settings(), under_launcher=True)  # type: ignore[operator]


def _loop(reporter: traincard_otel.Reporter, steps: int, report: Any) -> int | None:
    """A raw loop of 20 ms steps; the first step after whose step_end ``should_stop`` is true."""
    for step in range(1, steps + 1):
        time.sleep(0.02)
        report(step)
        reporter.step_end(step)
        if reporter.should_stop:
            return step
    return None


def test_a_nan_float_stops_a_raw_loop_at_its_own_step_end_and_the_guard_trips_once(store_dir: Any) -> None:
    nan_at = 6
    with receiver() as hook:
        reporter = traincard_otel.configure(stop_on="nan", notify=hook.url)
        loss = lambda step: float("nan") if step == nan_at else 1.0 / step  # noqa: E731
        assert _loop(reporter, 20, lambda step: reporter.metric("loss", loss(step), step)) == nan_at
        assert reporter.stop_reason == f"nan: loss is nan at step {nan_at}"
        reporter.flush()  # the rule judges the same NaN on the converter's thread: no second trip
        traincard_otel.shutdown()
        assert hook.wait_for("nan")["step"] == nan_at  # the notice still comes from the rule
        assert hook.kinds().count("nan") == 1
    run = traincard_otel.load(store_dir)
    guards = run.status["guards"]
    assert guards["trigger"]["kind"] == "nan" and guards["trigger"]["step"] == nan_at
    assert guards["trigger"]["message"] == f"loss is nan at step {nan_at}"
    assert [a["action"] for a in guards["actions"]] == ["stop requested", "stopped early"]
    (stop,) = [e for e in run.events if e["name"] == Event.GUARD_STOP_REQUESTED]
    assert stop["attributes"][Attr.GUARD_TRIGGER] == "nan" and stop["attributes"][Attr.STEP] == nan_at
    (anomaly,) = [e for e in run.events if e["name"] == Event.ANOMALY]
    assert anomaly["body"] == guards["trigger"]["message"] and run.status["status"] == "stopped_early"


def test_several_values_stop_on_the_one_the_nan_rule_judges() -> None:
    reporter = traincard_otel.configure(stop_on="nan", store="off", system=False)
    nan, inf = float("nan"), float("inf")

    def report(step: int) -> None:
        values = {"lr": nan, "eval_loss": nan, "loss": 0.5}  # NaN where the rule does not look
        if step == 4:
            values["grad_norm"] = inf
        reporter.metrics(values, step=step, tags={"split": "a"})

    assert _loop(reporter, 10, report) == 4
    assert reporter.stop_reason == "nan: grad_norm{split=a} is inf at step 4"


def test_a_nan_stops_nothing_where_stop_on_does_not_name_it_or_the_rules_are_off() -> None:
    for settings in ({"stop_on": "loss_spike"}, {"stop_on": "nan", "anomalies": "off"}):
        reporter = traincard_otel.configure(store="off", system=False, **settings)  # type: ignore[arg-type]
        assert _loop(reporter, 3, lambda step, r=reporter: r.metric("loss", float("nan"), step)) is None
        reporter.flush()
        assert not reporter.should_stop
        traincard_otel.shutdown()
