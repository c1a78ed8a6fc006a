"""A real Metaflow @parallel gang: 2 nodes x torchrun with 2 gloo ranks, one card for all 4 ranks.

Three variants, each run for real in subprocesses (Metaflow runs node 1 as a second task process,
each node starts ``python -m traincard_otel.torchrun`` = torch.distributed.run keeping its agent's
record): healthy with rank 2 slow; rank 3 (node 1) killed with SIGKILL at step 15; rank 3 hanging
at step 15. Each checks what ``load()`` returns on the worker task (any task reads the whole
gang) and what the rendered card shows in headless Chromium.

Timeouts tuned here, not in the product: ``--monitor_interval 0.5`` (the agent notices a dead
worker within half a second), ``--max_restarts 0`` (no elastic restart), the product's rank
timeout ``TRAINCARD_RANK_TIMEOUT=3`` s (hung ranks are named after 3 s without a heartbeat), and
the flow's 0.5 s store flush. torch 2.13's exit barrier (300 s) is not configurable from torchrun:
no variant reaches it (a failed worker group skips it, the healthy one passes it at once, the hung
one is stopped by the test).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._read.payload.gang import gang_section
from traincard_otel.exceptions import ConfigError

from tests.support.browser_helpers import open_html, screenshot
from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env
from tests.support.otlp_receiver import Received, http_receiver

pytest.importorskip("metaflow")
pytest.importorskip("torch")

FLOWS = REPO / "tests" / "integration" / "flows"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(root: Path, mode: str, **extra: str) -> dict[str, str]:
    env: dict[str, str] = subprocess_env(
        METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root),
        GANG_MODE=mode,
        GANG_MASTER_PORT=str(_free_port()),
        TRAINCARD_RANK_TIMEOUT="3",
        TRAINCARD_SYSTEM_INTERVAL="0.5",
        **extra,
    )
    return env


def _otlp(endpoint: str) -> dict[str, str]:
    """Metrics of every process of the flow to the test's OTLP receiver, exported every 0.5 s."""
    return {
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


def _points(got: Received, name: str) -> list[dict[str, Any]]:
    """The attributes of every point of metric ``name`` received, with its value."""
    with got.lock:
        return [
            {**p["attributes"], "value": p["value"]}
            for m in got.metrics
            if m["name"] == name
            for p in m["points"]
        ]


def _latest_points(got: Received, name: str) -> list[dict[str, Any]]:
    """The points of the last export of metric ``name``, with their values."""
    with got.lock:
        found = [m for m in got.metrics if m["name"] == name]
    return [{**p["attributes"], "value": p["value"]} for p in (found[-1]["points"] if found else [])]


def _start(tmp_path: Path, mode: str, **extra: str) -> tuple[Path, subprocess.Popen[str]]:
    for name in ("gang_flow.py", "gang_train.py"):
        shutil.copy(FLOWS / name, tmp_path / name)
    proc = subprocess.Popen(
        [sys.executable, "gang_flow.py", "--no-pylint", "run"],
        cwd=tmp_path,
        env=_env(tmp_path, mode, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return tmp_path, proc


def _train_dirs(root: Path) -> tuple[Path, Path]:
    runs = sorted((root / ".metaflow" / "GangFlow").glob("*/train"))
    assert runs, "the flow never reached the train step"
    train = runs[-1]
    control = next(d for d in train.iterdir() if d.name.isdigit())
    return control, train / f"{control.name}_node_1"


def _render(root: Path, target: str, out: Path) -> None:
    """`traincard render` in a child process, as a user would call it."""
    proc = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "render", target, "-o", str(out)],
        cwd=root,
        env=subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _card(driver: Any, html: Path, tmp_path: Path, name: str) -> dict[str, Any]:
    from selenium.webdriver.common.by import By

    open_html(driver, html.read_text(), tmp_path, f"{name}.html")
    assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    assert not driver.find_element(By.TAG_NAME, "body").get_attribute("data-error")
    screenshot(driver, name)
    rows = driver.find_elements(By.CSS_SELECTOR, "#tc-gang-ranks tbody tr")
    return {
        "world": driver.find_element(By.ID, "tc-gang-world").text,
        "headline": driver.find_element(By.ID, "tc-gang-headline").text,
        "nodes": [
            r.get_attribute("data-node")
            for r in driver.find_elements(By.CSS_SELECTOR, "#tc-gang-nodes tbody tr")
        ],
        "ranks": {
            r.get_attribute("data-rank"): (r.get_attribute("class") or "", r.text.split()) for r in rows
        },
        "first": (
            driver.find_element(By.ID, "tc-gang-first").text
            if driver.find_elements(By.ID, "tc-gang-first")
            else ""
        ),
    }


def _rank_pids(root: Path) -> set[int]:
    pids = set()
    for state in root.glob(".metaflow/GangFlow/*/train/*/traincard/a*/r*/*/state.json"):
        with contextlib.suppress(ValueError, OSError):
            pid = json.loads(state.read_text()).get("pid")
            if isinstance(pid, int) and pid != os.getpid():
                pids.add(pid)
    return pids


def _wait(proc: subprocess.Popen[str], timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail("the flow did not end in time:\n" + out[-4000:])
    return out


@pytest.mark.slow
def test_healthy_gang_with_a_slow_rank(browser: Any, tmp_path: Path) -> None:
    root, proc = _start(tmp_path, "healthy")
    out = _wait(proc, 240)
    assert proc.returncode == 0, out[-4000:]
    control, worker = _train_dirs(root)
    run = traincard_otel.load(worker)  # the worker task's store: the whole gang comes with it
    assert sorted(run.step_times) == [0, 1, 2, 3]
    assert {(s["rank"], s["node_index"]) for s in run.states} == {(0, 0), (1, 0), (2, 1), (3, 1)}
    assert all(s["status"] == "finished" for s in run.states)  # no step process counted as a rank
    section = gang_section(run.insights.gang)
    assert section is not None and section["world_size"] == 4 and section["num_nodes"] == 2
    assert [n["ranks"] for n in section["nodes"]] == [[0, 1], [2, 3]]
    assert section["stragglers"]["slowest"]["rank"] == 2 and section["stragglers"]["slowest"]["node"] == 1
    assert section["first_failure"] is None and section["hung"] == []
    assert all(r["data_wait_share"] is not None for r in section["ranks"])
    # Per-node system telemetry: both nodes sampled (by their step processes), node named.
    cpu = [s for s in run.system.values() if s.name == "system.cpu.utilization"]
    assert {s.tags["node"] for s in cpu} == {"node 0", "node 1"}

    html = tmp_path / "card.html"
    run_id = control.parent.parent.name
    _render(root, f"GangFlow/{run_id}/train/{worker.name}", html)  # a Metaflow pathspec of node 1
    card = _card(browser, html, tmp_path, "gang-healthy")
    assert card["world"].startswith("WORLD SIZE 4") or "world size 4" in card["world"].lower()
    assert card["nodes"] == ["0", "1"]
    assert "Straggler: rank 2 on node 1" in card["headline"]
    assert "tc-gang-slow" in card["ranks"]["2"][0]


@pytest.mark.slow
def test_a_rank_killed_on_node_1_is_the_first_failure(browser: Any, tmp_path: Path) -> None:
    with http_receiver() as (endpoint, got):
        root, proc = _start(tmp_path, "kill", **_otlp(endpoint))
        out = _wait(proc, 240)
        time.sleep(0.2)
    assert proc.returncode != 0
    # The metric an alert fires on: each failed rank counted once, the first one marked. Its last
    # export holds the settled analysis (a rank that rank 3 took down can look first for a moment).
    failed = _latest_points(got, "traincard.gang.rank_failures")
    assert all(p["value"] == 1 and p["host.name"] for p in failed), failed
    ranks = {p["traincard.rank"]: p for p in failed}
    assert set(ranks) <= {0, 1, 2, 3} and 3 in ranks, failed
    assert [r for r, p in ranks.items() if p["traincard.failure.first"]] == [3]
    assert (ranks[3]["traincard.node_index"], ranks[3]["traincard.signal"]) == (1, 9)
    control, worker = _train_dirs(root)
    deadline = time.monotonic() + 30  # node 1's task may still be writing its agent's record
    first: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        section = gang_section(traincard_otel.load(control).insights.gang)
        first = section["first_failure"] if section else None
        if first and first.get("signal") and len(first["consequences"]) == 3:
            break
        time.sleep(1)
    assert first is not None, out[-4000:]
    assert (first["rank"], first["node"], first["step"], first["signal"]) == (3, 1, 14, 9)
    assert first["exit_code"] == -9 and first["pid"] and first["host"]
    assert first["how"] == "killed (signal 9, SIGKILL)"  # no memory evidence: no OOM claim
    assert sorted(c["rank"] for c in first["consequences"]) == [0, 1, 2]
    assert first["last_metrics"]["loss"]["step"] == max(traincard_otel.load(control).metrics["loss"].steps)

    # Metaflow's own final cards, of the control task and of the worker, each show the whole gang.
    run_id = control.parent.parent.name
    for task in (control.name, worker.name):
        got = root / f"mf-card-{task}.html"
        subprocess.run(
            [
                sys.executable,
                "gang_flow.py",
                "--no-pylint",
                "card",
                "get",
                f"{run_id}/train/{task}",
                str(got),
            ],
            cwd=root,
            env=subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root)),
            capture_output=True,
            timeout=120,
            check=True,
        )
        payload = card_payload(got.read_text())
        assert payload["gang"]["world_size"] == 4 and payload["gang"]["first_failure"]["rank"] == 3
        assert payload["failure"]["message"].startswith("rank 3 on node 1")  # the cause, not rank 0's error

    html = tmp_path / "card.html"
    _render(root, str(worker), html)
    card = _card(browser, html, tmp_path, "gang-killed")
    assert card["nodes"] == ["0", "1"]
    assert "Rank 3 on node 1" in card["first"] and "signal 9" in card["first"] and "step 14" in card["first"]
    assert "tc-gang-failed" in card["ranks"]["3"][0]
    assert "First failure: rank 3 on node 1" in card["headline"]


@pytest.mark.slow
def test_a_hung_rank_is_named_within_one_rank_timeout(browser: Any, tmp_path: Path) -> None:
    receiver = http_receiver()
    endpoint, got = receiver.__enter__()
    root, proc = _start(tmp_path, "hang", TRAINCARD_STALL_TIMEOUT="2", **_otlp(endpoint))
    try:
        deadline = time.monotonic() + 150
        section: dict[str, Any] | None = None
        hung_at: float | None = None
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                control, worker = _train_dirs(root)
                section = gang_section(traincard_otel.load(control).insights.gang)
            except (AssertionError, StopIteration, ConfigError):  # not started yet
                continue
            if section and section["first_failure"] and section["first_failure"].get("culprit"):
                hung_at = hung_at or time.time()
                # (the other ranks' stack dumps may land a flush or two after the culprit's)
                if sum(len(g["ranks"]) for g in section["stacks"]["groups"]) == 4:
                    break
        assert section and section["first_failure"] and hung_at, "no hung rank named"
        first = section["first_failure"]
        assert (first["rank"], first["node"], first["step"]) == (3, 1, 14)
        # Its own stack names it, across nodes: outside the all-reduce the three others wait in.
        assert first["how"].startswith("hung in main at gang_train.py:"), first["how"]
        assert [g["ranks"] for g in section["stacks"]["groups"]] == [[3], [0, 1, 2]]
        assert all(c["how"].endswith("for rank 3") for c in first["consequences"])
        # Named within one rank timeout (3 s) of its last heartbeat, plus flush and poll periods.
        assert hung_at - first["heartbeat_at"] < 3 + 0.5 + 1 + 5
        assert section["world_size"] == 4
        html = tmp_path / "card.html"
        _render(root, str(worker), html)
        card = _card(browser, html, tmp_path, "gang-hung")
        assert "Rank 3 on node 1" in card["first"] and "hung" in card["first"] and "step 14" in card["first"]
        assert card["ranks"]["3"][1][4] == "hung"
        # The hung rank as a metric an alert fires on (the control node's watchdog looks every 1.5 s).
        # Its stack's place joins the point once the culprit's dump is in (a first point may precede it).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            "traincard.stack.where" in p for p in _points(got, "traincard.gang.ranks_hung")
        ):
            time.sleep(0.5)
        hung = _points(got, "traincard.gang.ranks_hung")
        assert {(p["traincard.rank"], p["traincard.node_index"], p["value"]) for p in hung} == {(3, 1, 1)}
        assert hung[-1]["traincard.stack.where"].startswith("in main at gang_train.py:"), hung
    finally:
        receiver.__exit__(None, None, None)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        # torch elastic starts each rank in a session of its own: killing the flow's process group
        # leaves the hung ranks behind. End them by the pids they recorded.
        for pid in _rank_pids(root):
            with contextlib.suppress(OSError):  # only a rank of this flow, never a reused pid
                if b"gang_train.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_under_plain_torchrun_the_killed_rank_is_named_from_torchruns_report(tmp_path: Path) -> None:
    """Each node starts ``python -m torch.distributed.run`` itself (no agent record): the step's
    console capture holds torchrun's failure report, and the card names rank 3 from it."""
    root, proc = _start(tmp_path, "kill", GANG_LAUNCHER="plain")
    out = _wait(proc, 240)
    assert proc.returncode != 0
    assert "Root Cause (first observed failure)" in out  # torchrun's own report, as a user sees it
    assert not list(root.glob(".metaflow/GangFlow/*/train/*/traincard/elastic/*"))  # no agent record
    control, worker = _train_dirs(root)
    deadline = time.monotonic() + 30  # node 1's task may still be writing its last logs
    first: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        section = gang_section(traincard_otel.load(control).insights.gang)
        first = section["first_failure"] if section else None
        if first and first.get("signal") and len(first["consequences"]) == 3:
            break
        time.sleep(1)
    assert first is not None, out[-4000:]
    assert (first["rank"], first["node"], first["step"], first["signal"], first["exit_code"]) == (
        3,
        1,
        14,
        9,
        -9,
    )
    assert first["pid"] and first["how"] == "killed (signal 9, SIGKILL)"
    assert any("torchrun's failure report" in e for e in first["evidence"]), first["evidence"]
    assert sorted(c["rank"] for c in first["consequences"]) == [0, 1, 2]

    html = tmp_path / "card.html"
    _render(root, str(worker), html)
    payload = card_payload(html.read_text())
    assert payload["gang"]["first_failure"]["rank"] == 3
    headline = " ".join(line["text"] for line in payload["gang"]["headline"])
    assert "First failure: rank 3 on node 1" in headline and "killed (signal 9, SIGKILL)" in headline
    assert payload["failure"]["message"].startswith("rank 3 on node 1")


def test_torchrun_wrapper_keeps_torchruns_arguments() -> None:
    """`python -m traincard_otel.torchrun --help` is torch.distributed.run's own parser."""
    proc = subprocess.run(
        [sys.executable, "-m", "traincard_otel.torchrun", "--help"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "--nproc_per_node" in proc.stdout and "--node_rank" in proc.stdout
    assert re.search(r"training_script", proc.stdout)


@pytest.mark.slow
def test_the_same_gang_on_the_s3_datastore(tmp_path: Path) -> None:
    """On S3 (the local S3 emulator) every node writes only its own objects; reading the worker
    task through Metaflow's client gathers the whole gang from the bucket."""
    pytest.importorskip("moto")
    import boto3

    from tests.support.s3_server import BUCKET, _boto_kwargs, metaflow_s3_env, s3_server

    for name in ("gang_flow.py", "gang_train.py"):
        shutil.copy(FLOWS / name, tmp_path / name)
    with s3_server() as endpoint:
        # Fewer steps and no live refreshes: the layout is what this variant checks, and every
        # Metaflow S3 read against the emulator costs a subprocess (the flow's own argument sets
        # the refresh interval, so TRAINCARD_REFRESH_INTERVAL would not).
        env = {
            **_env(tmp_path, "healthy"),
            **metaflow_s3_env(endpoint),
            "GANG_STEPS": "20",
            "GANG_REFRESH_INTERVAL": "60",
        }
        proc = subprocess.run(
            [sys.executable, "gang_flow.py", "--no-pylint", "--datastore=s3", "run"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        run_id, task_id = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr).groups()  # type: ignore[union-attr]
        s3 = boto3.client("s3", endpoint_url=endpoint, **_boto_kwargs())
        prefix = f"metaflow/GangFlow/{run_id}/train/"
        keys = [o["Key"][len(prefix) :] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
        control = {k.split("/traincard/", 1)[1] for k in keys if k.startswith(f"{task_id}/traincard/")}
        worker = {k.split("/traincard/", 1)[1] for k in keys if k.startswith(f"{task_id}_node_1/traincard/")}
        assert {"gang.json", "gang/node-0.json", "gang/node-1.json"} <= control
        assert "gang.json" in worker and not any(k.startswith("gang/") for k in worker)
        # Ranks 0-1 (node 0) write only under the control task, ranks 2-3 (node 1) under the worker.
        assert {k.split("/")[1] for k in control if k.startswith("a0/")} == {"r0", "r1"}
        assert {k.split("/")[1] for k in worker if k.startswith("a0/")} == {
            "r1",
            "r2",
            "r3",
        }  # r1: step process
        assert not list(tmp_path.rglob("traincard/a0"))  # the stores live in the bucket only

        code = (
            "run = traincard_otel.load(metaflow.Task(sys.argv[1]))\n"
            "g = run.gang['summary']\n"
            "print(json.dumps({'world': g['world_size'], 'nodes': [n['ranks'] for n in g['nodes']],\n"
            "                  'slowest': g['stragglers']['slowest']['rank'], 'source': run.source}))"
        )
        got = metaflow_client(code, f"GangFlow/{run_id}/train/{task_id}_node_1", tmp_path, env)
        assert got == {
            "world": 4,
            "nodes": [[0, 1], [2, 3]],
            "slowest": 2,
            "source": f"GangFlow/{run_id}/train",
        }
