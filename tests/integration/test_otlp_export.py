"""A real training loop exporting over OTLP (HTTP/protobuf and gRPC) to a receiver in the test."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO, subprocess_env
from tests.support.otlp_receiver import grpc_receiver, http_receiver
from tests.support.schema_names import otel_metric_names

STEPS = 60


def _train_env(tmp_path: Path, endpoint: str, protocol: str) -> dict[str, str]:
    return subprocess_env(
        TRAINCARD_DIR=str(tmp_path / "store"),
        TRAINCARD_SYSTEM_INTERVAL="0.5",
        OTEL_SERVICE_NAME="raw-loop",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment.name=test,team=ml",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_LOGS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        OTEL_EXPORTER_OTLP_HEADERS="x-scope-orgid=team1",
        OTEL_EXPORTER_OTLP_COMPRESSION="gzip",
        OTEL_METRIC_EXPORT_INTERVAL="500",
    )


def _train_command(tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        str(REPO / "examples" / "raw_reporter_loop.py"),
        "--steps",
        str(STEPS),
        "--sleep",
        "0.02",
        "--checkpoint-every",
        "30",
        "--checkpoint-dir",
        str(tmp_path / "checkpoints"),
    ]


def _train(tmp_path: Path, endpoint: str, protocol: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _train_command(tmp_path),
        env=_train_env(tmp_path, endpoint, protocol),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_everything_arrives_over_otlp(tmp_path: Path, protocol: str) -> None:
    receiver = http_receiver if protocol == "http/protobuf" else grpc_receiver
    with receiver() as (endpoint, got):
        proc = _train(tmp_path, endpoint, protocol)
        assert proc.returncode == 0, proc.stderr[-3000:]
        time.sleep(0.2)

    # Spans: one run span, phases as its children, checkpoints as span events.
    run = [s for s in got.spans if s["name"] == "training.run"]
    assert len(run) == 1
    trace_id, run_id = run[0]["trace_id"], run[0]["span_id"]
    phases = [s for s in got.spans if s["name"] in {"training.train", "training.save"}]
    assert {s["name"] for s in phases} == {"training.train", "training.save"}
    assert all(s["trace_id"] == trace_id and s["parent"] == run_id for s in phases)
    assert all(s["end"] > s["start"] for s in phases)
    saves = [s for s in phases if s["name"] == "training.save"]
    assert len(saves) == 2 and all(s["events"] == ["traincard.checkpoint.saved"] for s in saves)

    # Resource attributes identify the process.
    res = run[0]["resource"]
    assert res["service.name"] == "raw-loop" and res["traincard.rank"] == 0
    assert res["deployment.environment.name"] == "test" and res["team"] == "ml" and "host.name" in res

    # Logs: per-step rows, checkpoint events correlated with the save spans, the text log line.
    batches = [lr for lr in got.logs if lr["event_name"] == "traincard.metrics"]
    runs = [run for b in batches for run in b["body"]["runs"]]
    assert all(
        b["attributes"]["traincard.rows"] == sum(len(r["steps"]) for r in b["body"]["runs"]) for b in batches
    )
    assert all(
        len(r["values"]) == len(r["steps"]) * len(r["names"]) == len(r["times"]) * len(r["names"])
        for r in runs
    )
    assert [s for r in runs for s in r["steps"]] == list(range(1, STEPS + 1))
    losses = [
        r["values"][i * len(r["names"]) + r["names"].index("loss")]
        for r in runs
        for i in range(len(r["steps"]))
    ]
    local = traincard_otel.load(tmp_path / "store")
    assert losses == local.metrics["loss"].values
    timing = [lr["body"] for lr in got.logs if lr["event_name"] == "traincard.step.timing"]
    assert [s for b in timing for s in b["steps"]] == list(range(1, STEPS + 1))
    assert all(n == 32 and d > 0 for b in timing for n, d in zip(b["samples"], b["durations"], strict=True))
    ckpts = [lr for lr in got.logs if lr["event_name"] == "traincard.checkpoint.saved"]
    assert {(c["trace_id"], c["span_id"]) for c in ckpts} == {(trace_id, s["span_id"]) for s in saves}
    assert any(lr["body"] == "training done" and lr["severity"] == "INFO" for lr in got.logs)
    # What the loop printed, captured from its stdout: with a log exporter configured the lines go
    # through the SDK, and reach the collector and the store alike.
    printed = [f"step {step}" for step in range(1, STEPS + 1)]
    exported = [lr["body"] for lr in got.logs if lr["attributes"].get("log.iostream") == "stdout"]
    assert exported == printed
    stored = [log["message"] for log in local.logs if log["attributes"].get("log.iostream") == "stdout"]
    assert stored == printed

    # Metrics: training gauges/counters/histogram, cumulative temporality, semconv system names.
    by_name = {m["name"]: m for m in got.metrics}
    assert by_name["traincard.metric"]["unit"] == "1"
    assert {p["attributes"]["traincard.metric.name"] for p in by_name["traincard.metric"]["points"]} >= {
        "loss",
        "lr",
    }
    assert by_name["traincard.step.duration"]["kind"] == "histogram"
    assert by_name["traincard.steps"]["temporality"] == 2  # cumulative
    assert (
        max(p["value"] for m in got.metrics if m["name"] == "traincard.steps" for p in m["points"]) == STEPS
    )
    assert by_name["traincard.checkpoints"]["kind"] == "sum"
    for name in ("system.cpu.utilization", "system.memory.usage", "process.memory.usage"):
        assert name in by_name, f"{name} not exported"
    assert set(by_name) - otel_metric_names() == set()
    assert any(h.get("x-scope-orgid") == "team1" for h in got.headers)


@pytest.mark.slow
def test_unreachable_endpoint_never_delays_exit(tmp_path: Path) -> None:
    err = tmp_path / "stderr.txt"
    with err.open("w") as err_file:
        proc = subprocess.Popen(
            _train_command(tmp_path),
            env=_train_env(tmp_path, "http://127.0.0.1:9", "http/protobuf"),
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
        )
    assert proc.stdout is not None
    last_step_at = None
    for line in proc.stdout:  # the loop prints "step N" after each step
        if line.strip() == f"step {STEPS}":
            last_step_at = time.monotonic()
    code = proc.wait(60)
    exited_after = time.monotonic() - (last_step_at or 0.0)
    assert code == 0 and last_step_at is not None, err.read_text()[-2000:]
    # From the last step to the exit: the shutdown bound (3 s) and the interpreter's teardown; the
    # SDK alone would wait 10 s+ per signal for the unreachable endpoint.
    assert exited_after < 8, exited_after
    assert traincard_otel.load(tmp_path / "store").metrics["loss"].steps[-1] == STEPS
