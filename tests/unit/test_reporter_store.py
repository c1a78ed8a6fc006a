"""The reporter -> OTel pipeline -> store -> load() path, in process, with real OTel and real files."""

from __future__ import annotations

import functools
import json
import logging
import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import traincard_otel
from traincard_otel.testing import capture

from tests.support.helpers import subprocess_env


def test_metrics_phases_checkpoints_logs_round_trip(store_dir: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt-10"
    ckpt.mkdir()
    (ckpt / "weights.bin").write_bytes(b"x" * 12345)
    r = traincard_otel.configure()
    with r.phase("train"):
        for step in range(1, 11):
            r.metrics({"loss": 1.0 / step, "lr": 0.01}, step=step)
            r.step_end(step, duration_s=0.02, samples=4, tokens=256)
        with r.phase("save"):
            r.checkpoint(ckpt, step=10, metadata={"metric": "eval_loss", "value": 0.5})
    r.log("done <b>bold</b>", "WARNING")
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == list(range(1, 11))
    assert run.metrics["loss"].values == [1.0 / s for s in range(1, 11)]
    assert {p["n"] for p in run.phases} == {"training.run", "training.train", "training.save"}
    save = next(p for p in run.phases if p["n"] == "training.save")
    assert save["t1"] >= save["t0"]
    assert run.checkpoints[0]["size_bytes"] == 12345
    assert run.checkpoints[0]["best"] is True
    assert run.logs[-1]["message"] == "done <b>bold</b>" and run.logs[-1]["level"] == "WARNING"
    assert run.status["status"] == "finished"
    assert run.throughput["tokens_per_second{rank=0}"].values[0] == pytest.approx(256 / 0.02)


def test_interleaved_names_phases_and_tags_come_back_row_for_row(store_dir: Path) -> None:
    r = traincard_otel.configure()
    for step in range(1, 31):
        r.metrics({"loss": 1.0 / step, "lr": 0.01}, step=step)
        if step % 3 == 0:
            r.metrics({"eval_loss": 2.0 / step}, step=step, phase="eval")
        if step % 5 == 0:
            r.metrics({"util": step / 100}, step=step, tags={"gpu": "1"})
        if step == 7:
            r.metrics({"loss": 1.0 / step}, step=step)  # a row with fewer names
        r.step_end(
            step, duration_s=0.01 if step % 2 else None, samples=8, data_wait_s=0.001 if step > 20 else None
        )
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == [*range(1, 8), 7, *range(8, 31)]
    assert run.metrics["lr"].steps == list(range(1, 31))
    assert run.metrics["eval_loss"].steps == list(range(3, 31, 3))
    assert run.metrics["eval_loss"].values == [2.0 / s for s in range(3, 31, 3)]
    assert run.metrics["util{gpu=1}"].values == [s / 100 for s in range(5, 31, 5)]
    assert run.step_times[0].steps == list(range(1, 31))  # without a duration, the reporter timed it
    given = [v for s, v in zip(run.step_times[0].steps, run.step_times[0].values, strict=True) if s % 2]
    assert given == [0.01] * 15
    samples = run.throughput["samples_per_second{rank=0}"]
    assert [v for s, v in zip(samples.steps, samples.values, strict=True) if s % 2] == [800.0] * 15


def test_a_step_end_timed_by_the_perf_counter_is_stored_at_wall_clock_time(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = traincard_otel.configure()
    before = time.time()
    r.step_end(1, duration_s=0.01, at=time.perf_counter())
    after = time.time()
    r.flush()  # a drain: the background thread re-reads the clocks' offset
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600.0)  # the wall clock steps an hour
    r.flush()
    r.step_end(2, duration_s=0.01, at=time.perf_counter())
    monkeypatch.undo()
    traincard_otel.shutdown()

    times = traincard_otel.load(store_dir).step_times[0].times
    assert before - 0.01 <= times[0] <= after + 0.01
    assert times[1] - after == pytest.approx(3600.0, abs=5.0)


def test_a_step_end_with_a_bad_at_is_stored_at_the_wall_clock_and_logged_once(
    store_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = traincard_otel.configure()
    before = time.time()
    with caplog.at_level(logging.WARNING, logger="traincard_otel"):
        r.step_end(1, duration_s=0.01, at="soon")  # type: ignore[arg-type]
        r.step_end(2, duration_s=0.01, at=object())  # type: ignore[arg-type]
    after = time.time()
    traincard_otel.shutdown()

    assert [rec.getMessage() for rec in caplog.records if "step_end(at=" in rec.getMessage()] == [
        "traincard: step_end(at='soon') is not a time.perf_counter() reading; "
        "the wall clock's time is used (reported once)"
    ]
    series = traincard_otel.load(store_dir).step_times[0]
    assert series.steps == [1, 2]
    assert all(before <= t <= after for t in series.times)


def test_a_flush_holds_everything_reported_before_it(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINCARD_FLUSH_INTERVAL", "3600")  # no scheduled flush in between
    r = traincard_otel.configure()
    r.metrics({"loss": 0.5}, step=1)
    r.step_end(1, duration_s=0.01)
    assert r.flush()
    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == [1] and run.status["step"] == 1
    traincard_otel.shutdown()


def test_bad_values_are_recorded_or_rejected_never_raised(
    store_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = traincard_otel.configure()
    with caplog.at_level(logging.WARNING, logger="traincard_otel"):
        r.metrics({"loss": torch.tensor(0.25), "acc": np.float32(0.5), "n": np.int64(3)}, step=1)
        r.metric("loss", float("nan"), step=2)
        r.metric("loss", float("inf"), step=3)
        r.metric("text", "not a number", step=4)
        r.metric("", 1.0, step=5)
        r.metric("tagged", 1.0, step=6, tags={"gpu": 0})  # type: ignore[dict-item]
        r.metric("tagged", 2.0, step=6, tags={"gpu": "0"})
        r.metrics({"loss": 0.125, "acc": "high"}, step=7)  # a known name is still checked
        traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    loss = run.metrics["loss"]
    assert loss.values[0] == 0.25 and math.isnan(loss.values[1]) and math.isinf(loss.values[2])
    assert loss.values[3] == 0.125
    assert run.metrics["acc"].values == [0.5] and run.metrics["n"].values == [3.0]
    assert "text" not in run.metrics and "" not in run.metrics
    assert list(run.metrics).count("tagged{gpu=0}") == 1 and run.metrics["tagged{gpu=0}"].values == [2.0]
    rejected = run.status["rejected"]
    assert rejected["bad_name"] == 1 and rejected["bad_tags"] == 1 and rejected["not_a_number:text"] == 1
    assert rejected["not_a_number:acc"] == 1
    messages = " ".join(rec.getMessage() for rec in caplog.records)
    assert "not a number" in messages and "non-empty strings" in messages and "is nan" in messages


def test_a_step_end_with_a_bad_step_is_counted_and_the_rest_kept(
    store_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINCARD_FLUSH_INTERVAL", "3600")  # drains only where the test says
    r = traincard_otel.configure()
    logged: list[tuple[dict[str, float], int, str]] = []
    r.add_metric_source(lambda: [logged.pop(0) for _ in range(len(logged))])  # as the HF adapter's
    with caplog.at_level(logging.WARNING, logger="traincard_otel"):
        r.step_end(1, 0.01)
        r.step_end([2], 0.01)  # type: ignore[arg-type]
        r.step_end(np.int64(3), 0.01)  # type: ignore[arg-type]
        logged.append(({"loss": 0.5}, 3, "train"))
        r.flush()  # the bad step's drain: its reports are kept, timed when read
        r.step_end(torch.tensor(4), 0.01)  # type: ignore[arg-type]
        logged.append(({"loss": 0.25}, 4, "train"))
        traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.step_times[0].steps == [1, 3, 4]
    assert run.metrics["loss"].steps == [3, 4]
    assert run.metrics["loss"].times[1] == run.step_times[0].times[2]  # placed at its step end
    assert run.status["rejected"] == {"bad_step": 1}
    assert "is not a step number" in caplog.text


def test_step_end_counts_and_times_that_are_not_numbers_are_counted_never_stored(
    store_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = traincard_otel.configure()
    with caplog.at_level(logging.WARNING, logger="traincard_otel"):
        r.step_end(1, 0.01, torch.tensor(4), np.int64(128))  # type: ignore[arg-type]
        r.step_end(2, 0.01, "four", None)  # type: ignore[arg-type]
        r.step_end(3, torch.tensor(0.01), 4, -128, data_wait_s=np.float32(0.001))  # type: ignore[arg-type]
        r.step_end(4, "slow", 4, 128, data_wait_s="x")  # type: ignore[arg-type]
        r.step_end(5, 0.01, 4, 128)
        traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)  # loads: nothing that is not a number was stored
    assert run.step_times[0].steps == [1, 2, 3, 5]  # step 4's time was not measured
    samples = run.throughput["samples_per_second{rank=0}"]
    tokens = run.throughput["tokens_per_second{rank=0}"]
    assert samples.steps == [1, 3, 5] and samples.values[0] == pytest.approx(400.0)
    assert tokens.steps == [1, 5] and tokens.values[0] == pytest.approx(12800.0)
    assert run.status["rejected"] == {
        "bad_samples": 1,
        "bad_tokens": 1,
        "bad_duration_s": 1,
        "bad_data_wait_s": 1,
    }
    assert "is not a count" in caplog.text and "is not a number of seconds" in caplog.text


def test_sdk_disabled_is_a_silent_no_op(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    r = traincard_otel.configure()
    assert not r.enabled
    with r.phase("train"):
        r.metrics({"loss": 1.0}, step=1)
        r.checkpoint("nowhere", step=1)
        r.failure(RuntimeError("x"))
    r.close()
    assert not store_dir.exists()


def test_resource_attributes(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("GROUP_RANK", "1")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci,team=ml")
    monkeypatch.setenv("TRAINCARD_REPORT_RANKS", "all")
    with capture() as cap:
        pass
    attrs = dict(cap.spans[0].resource.attributes)
    assert attrs["traincard.rank"] == 3 and attrs["traincard.local_rank"] == 1
    assert attrs["traincard.world_size"] == 4 and attrs["traincard.node_rank"] == 1
    assert attrs["deployment.environment.name"] == "ci" and attrs["team"] == "ml"
    assert "host.name" in attrs


def test_service_name_env_and_argument(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    with capture() as cap:
        pass
    assert cap.spans[0].resource.attributes["service.name"] == "from-env"
    with capture(service_name="from-code") as cap:
        pass
    assert cap.spans[0].resource.attributes["service.name"] == "from-code"


def test_configure_again_with_other_settings_is_an_error(store_dir: Path) -> None:
    r = traincard_otel.configure(hourly_cost=2.0)
    assert traincard_otel.configure(hourly_cost=2.0).step == r.step  # the same settings: the same pipeline
    assert traincard_otel.Reporter().settings == r.settings  # none given: the running pipeline
    with pytest.raises(traincard_otel.ConfigError, match=r"already running with hourly_cost=2\.0.*shutdown"):
        traincard_otel.configure(hourly_cost=3.0)
    with pytest.raises(TypeError, match="hourly_costs"):  # keyword-only and typed: mypy says so too
        traincard_otel.configure(hourly_costs=3.0)  # type: ignore[call-arg]
    with pytest.raises(traincard_otel.ConfigError, match="unknown setting"):
        traincard_otel.Reporter(hourly_costs=3.0)
    traincard_otel.shutdown()
    assert traincard_otel.configure(hourly_cost=3.0).settings.hourly_cost == 3.0  # type: ignore[union-attr]
    traincard_otel.shutdown()


def test_the_seed_api_works_without_any_other_call(store_dir: Path, tmp_path: Path) -> None:
    from traincard_otel import Reporter

    (tmp_path / "ckpt").write_bytes(b"x" * 100)
    reporter = Reporter()
    with reporter.phase("train"):
        for step in range(1, 4):
            reporter.metric("loss", 1.0 / step, step)
            reporter.metric("grad_norm", 0.5)  # no step: the step the reporter is at
            reporter.log(f"step {step}")
            reporter.heartbeat()
        reporter.checkpoint(tmp_path / "ckpt", metadata={})
    reporter.system({"my.gauge": 7})
    reporter.close()
    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == [1, 2, 3] and run.metrics["grad_norm"].steps == [1, 2, 3]
    assert [line["message"] for line in run.logs][-3:] == ["step 1", "step 2", "step 3"]
    assert run.checkpoints[0]["size_bytes"] == 100 and run.status["status"] == "finished"


def test_only_rank_zero_reports_training_metrics_by_default(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    r = traincard_otel.configure()
    r.metrics({"loss": 1.0}, step=1)
    r.step_end(1, duration_s=0.1)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert "loss" not in run.metrics
    assert run.step_times[1].steps == [1]


def _run_script(body: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=subprocess_env(**env)
    )
    return proc, time.monotonic() - t0


def test_exit_flushes_without_close_and_is_bounded_with_a_dead_otlp_endpoint(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc, elapsed = _run_script(
        """
        import time, traincard_otel
        r = traincard_otel.configure()
        for s in range(20):
            r.metrics({"loss": 1.0 / (s + 1)}, step=s)
        t0 = time.monotonic()
        """,
        tmp_path,
        TRAINCARD_DIR=str(store),
        TRAINCARD_SYSTEM="false",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_LOGS_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
    )
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 8.0  # interpreter start + imports + a shutdown bounded at 3 s
    run = traincard_otel.load(store)
    assert run.metrics["loss"].steps == list(range(20))


def test_uncaught_exception_is_recorded_as_failure(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc, _ = _run_script(
        """
        import traincard_otel
        r = traincard_otel.configure()
        with r.phase("train"):
            r.metrics({"loss": 2.0}, step=7)
            raise ValueError("boom at step 7")
        """,
        tmp_path,
        TRAINCARD_DIR=str(store),
        TRAINCARD_SYSTEM="false",
    )
    assert proc.returncode == 1 and "boom at step 7" in proc.stderr
    run = traincard_otel.load(store)
    failure = run.status["failure"]
    assert failure["type"] == "ValueError" and failure["step"] == 7 and failure["phase"] == "train"
    assert failure["last_metrics"] == {"loss": 2.0}
    assert run.status["status"] == "failed"


def test_local_writes_replace_whole_files_and_survive_their_folder_being_removed(tmp_path: Path) -> None:
    import shutil

    from traincard_otel._store.backends import LocalBackend

    backend = LocalBackend(tmp_path / "store")
    backend.write("a/b/state.json", b"1")
    backend.write("a/b/state.json", b"22")
    assert (tmp_path / "store/a/b/state.json").read_bytes() == b"22"
    shutil.rmtree(tmp_path / "store")  # e.g. cleaned up by hand while training runs
    backend.write("a/b/state.json", b"333")
    assert backend.list() == ["a/b/state.json"]  # no temporary file left behind
    assert backend.read_many(["a/b/state.json"]) == {"a/b/state.json": b"333"}


def test_corrupt_segment_is_skipped_and_counted(store_dir: Path) -> None:
    r = traincard_otel.configure()
    r.metrics({"loss": 1.0}, step=1)
    traincard_otel.shutdown()
    seg = next(store_dir.rglob("seg-*.jsonl"))
    (seg.parent / "seg-99999999.jsonl").write_bytes(b'{"k":"m","t":1,"s":2,"v":{"loss":0.5}}\n{"k":"m","t":')
    run = traincard_otel.load(store_dir)
    assert run.stats["corrupt_segments"] == 1
    assert run.metrics["loss"].values == [1.0, 0.5]
    state = json.loads(next(store_dir.rglob("state.json")).read_text())
    assert state["status"] == "finished"


def test_python_logging_reaches_the_log_tail_with_tracebacks(
    store_dir: Path, request: pytest.FixtureRequest
) -> None:
    root = logging.getLogger()
    request.addfinalizer(functools.partial(root.setLevel, root.level))
    root.setLevel(logging.WARNING)
    traincard_otel.configure()
    assert root.level == logging.INFO  # lowered so that INFO records reach the card
    log = logging.getLogger("my.training")
    log.info("epoch 1 done")
    try:
        raise KeyError("missing shard")
    except KeyError:
        log.exception("data loader hiccup")
    logging.getLogger("opentelemetry.sdk").error("exporter down")  # never fed back into the pipeline
    traincard_otel.shutdown()
    assert root.level == logging.WARNING  # the user's own level once telemetry is shut down
    logs = traincard_otel.load(store_dir).logs
    assert any(r["message"] == "my.training: epoch 1 done" and r["level"] == "INFO" for r in logs)
    err = next(r for r in logs if "data loader hiccup" in r["message"])
    assert err["level"] == "ERROR" and "KeyError: 'missing shard'" in err["traceback"]
    assert not any("exporter down" in r["message"] for r in logs)


def _library_logger(name: str, handler: logging.Handler) -> logging.Logger:
    """A logger as transformers, Lightning and torch set theirs up: a handler of its own, no
    propagation to the root logger."""
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


def test_library_loggers_that_do_not_propagate_reach_the_log_tail_with_their_level(
    store_dir: Path, request: pytest.FixtureRequest
) -> None:
    import io

    printed = io.StringIO()
    made: list[logging.Logger] = []

    def library(name: str, handler: logging.Handler) -> logging.Logger:
        logger = _library_logger(name, handler)
        made.append(logger)
        request.addfinalizer(lambda: (logger.removeHandler(handler), setattr(logger, "propagate", True)))
        return logger

    early = library("tc_test_lib", logging.StreamHandler(printed))
    silent = library("tc_test_silent", logging.NullHandler())  # meant to go nowhere: left alone
    traincard_otel.configure(flush_interval_s=0.1)
    late = library("tc_test_late_lib", logging.StreamHandler(printed))  # made after set-up
    time.sleep(0.5)  # (the pipeline's next turns find it)
    early.getChild("trainer").warning("the library warns")
    early.info("the library informs")
    late.warning("a late library warns")
    silent.warning("nobody should see this")
    early.propagate = True  # a library that turns propagation on: one record, not two
    early.warning("propagating now")
    early.propagate = False
    traincard_otel.shutdown()
    assert "the library warns" in printed.getvalue()  # the library's own handler still prints
    assert not [h for lg in made for h in lg.handlers if type(h).__name__ == "QueueHandler"]  # detached
    got = [(r["level"], r["message"]) for r in traincard_otel.load(store_dir).logs]
    assert ("WARNING", "tc_test_lib.trainer: the library warns") in got
    assert ("INFO", "tc_test_lib: the library informs") in got
    assert ("WARNING", "tc_test_late_lib: a late library warns") in got
    assert [m for _level, m in got if "propagating now" in m] == ["tc_test_lib: propagating now"]
    assert not [m for _level, m in got if "nobody should see this" in m]


def test_incremental_reader_adds_only_what_is_new(store_dir: Path) -> None:
    from traincard_otel._read.load.reader import StoreReader
    from traincard_otel._store.backends import LocalBackend

    r = traincard_otel.configure()
    for s in range(1, 11):
        r.metrics({"loss": float(s)}, step=s)
    assert r.flush()
    reader = StoreReader(LocalBackend(store_dir))
    first = reader.read()
    assert first.metrics["loss"].steps == list(range(1, 11))
    for s in range(11, 21):
        r.metrics({"loss": float(s)}, step=s)
    traincard_otel.shutdown()
    second = reader.read()
    assert second is first  # the same series objects grow
    assert second.metrics["loss"].steps == list(range(1, 21))
    assert second.stats["segments"] == len(list(store_dir.rglob("seg-*.jsonl")))
    assert second.status["status"] == "finished"


def test_raw_loop_cuda_oom_shaped_error_gets_the_verdict_and_last_system_state(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc, _ = _run_script(
        """
        import time, traincard_otel
        r = traincard_otel.configure()
        with r.phase("train"):
            for step in range(1, 6):
                r.metrics({"loss": 1.0 / step}, step=step)
                r.step_end(step, duration_s=0.01)
            time.sleep(0.6)
            raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 79.1 GiB total)")
        """,
        tmp_path,
        TRAINCARD_DIR=str(store),
        TRAINCARD_SYSTEM_INTERVAL="0.2",
    )
    assert proc.returncode == 1
    failure = traincard_otel.load(store).status["failure"]
    assert failure["verdict"]["kind"] == "cuda_oom" and failure["step"] == 5 and failure["phase"] == "train"
    assert failure["last_metrics"] == {"loss": 0.2}
    assert (
        "process.memory.usage" in failure["last_system"]
        and "system.cpu.utilization" in failure["last_system"]
    )


def test_warnings_still_reach_stderr_when_nobody_configured_logging(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import logging, traincard_otel
        traincard_otel.configure()
        logging.getLogger("user.code").warning("careful")
        logging.getLogger("user.code").info("quiet")  # below the last-resort level, as without us
        traincard_otel.shutdown()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_SYSTEM="false"),
    )
    assert out.returncode == 0, out.stderr
    assert "careful" in out.stderr and "quiet" not in out.stderr
    messages = [line["message"] for line in traincard_otel.load(tmp_path / "store").logs]
    assert "user.code: careful" in messages and "user.code: quiet" in messages
