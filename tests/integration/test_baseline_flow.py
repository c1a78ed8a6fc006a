"""The same small flow run several times for real (Metaflow in subprocesses, local datastore and
metadata): each run's card and ``load()`` compare it with the latest earlier good run, or with the
run the user named; a first run and an unreadable named baseline give a quiet note."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env

pytest.importorskip("metaflow")
FLOW = REPO / "tests" / "integration" / "flows" / "baseline_flow.py"


def run_flow(root: Path, *args: str, **env_vars: str) -> str:
    """Run the flow under ``root`` and return its train task's pathspec."""
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root), TRAINCARD_SYSTEM="false", **env_vars)
    proc = subprocess.run(
        [sys.executable, "baseline_flow.py", "--no-pylint", "run", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    match = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-3000:]
    return f"BaselineFlow/{match.group(1)}/train/{match.group(2)}"


def final_card(root: Path, pathspec: str, final: bool | None = True, **env_vars: str) -> dict[str, Any]:
    code = (
        "from metaflow.cards import get_cards\n"
        "print(json.dumps([c.get() for c in get_cards(metaflow.Task(sys.argv[1]), type='traincard')]))"
    )
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root), **env_vars)
    pages = metaflow_client(code, pathspec, root, env)
    payloads: list[dict[str, Any]] = [card_payload(html) for html in pages if 'id="tc-payload"' in html]
    assert len(payloads) == 1, pages
    assert final is None or payloads[0]["final"] is final
    return payloads[0]


def last_live_payload(root: Path, pathspec: str) -> dict[str, Any]:
    """The last payload the task process pushed (Metaflow keeps it as the card's final data)."""
    flow, run, step, task = pathspec.split("/")
    folder = root / ".metaflow" / "mf.cards" / flow / "runs" / run / "steps" / step / "tasks" / task
    folder = folder / "runtime"
    [data] = list(folder.glob("traincard*.data.json"))
    pushed: dict[str, Any] = json.loads(data.read_text())["data"]
    return pushed


def loaded(root: Path, pathspec: str, baseline: str, **env_vars: str) -> dict[str, Any]:
    code = (
        f"run = traincard_otel.load(sys.argv[1], baseline={baseline!r})\n"
        "cmp = run.compare()\n"
        "print(json.dumps({'label': run.baseline.label, 'note': run.baseline.note,\n"
        "                  'run_id': run.baseline.run_id,\n"
        "                  'cmp': cmp.as_dict() if cmp else None}))"
    )
    got: dict[str, Any] = metaflow_client(
        code, pathspec, root, subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root), **env_vars)
    )
    return got


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("baseline")
    shutil.copy(FLOW, d / "baseline_flow.py")
    return d


@pytest.fixture(scope="module")
def first(root: Path) -> str:
    return run_flow(root)


@pytest.fixture(scope="module")
def second(root: Path, first: str) -> str:
    return run_flow(root, "--scale", "1.2", "--step_s", "0.0125")


@pytest.mark.slow
def test_a_first_run_has_no_baseline_and_says_so_quietly(root: Path, first: str) -> None:
    payload = final_card(root, first)
    note = "no earlier successful run of BaselineFlow/train"
    assert payload["baseline"]["note"] == note
    assert payload["baseline"]["series"] == [] and payload["baseline"]["status"] == []
    assert payload["run"]["status"] == "finished" and not payload["banners"]
    assert last_live_payload(root, first)["baseline"]["note"] == note


@pytest.mark.slow
def test_the_second_run_is_compared_with_the_first(root: Path, first: str, second: str) -> None:
    run_id = first.split("/")[1]
    payload = final_card(root, second)
    b = payload["baseline"]
    assert b["label"] == first and b["run_id"] == run_id and b["note"] is None
    series = {s["label"]: s for s in b["series"]}
    assert set(series) == {f"train \u00b7 baseline {run_id}", f"eval \u00b7 baseline {run_id}"}
    train = series[f"train \u00b7 baseline {run_id}"]
    assert train["chart"] == "loss" and train["x"][0] == 1 and train["x"][-1] == 300
    assert train["y"][0] == 1.0  # the first run's loss at step 1
    assert series[f"eval \u00b7 baseline {run_id}"]["x"] == [60, 120, 180, 240, 300]
    metric, step_time = b["status"]
    assert metric["verdict"] == "behind" and metric["step"] == 300
    assert metric["relative"] == pytest.approx(0.2)
    assert metric["text"].startswith("loss behind baseline at step 300: ")
    assert metric["text"].endswith("(20 % higher)")
    assert step_time["text"] == "time per step behind baseline at step 300: 12.5 ms vs 10 ms (25 % slower)"

    # the task process found the same baseline on its own and pushed it with its live payloads
    live = last_live_payload(root, second)["baseline"]
    assert live["label"] == first and live["series"] and live["status"]

    got = loaded(root, second, "auto")
    assert got["label"] == first and got["note"] is None and got["run_id"] == run_id
    assert got["cmp"]["metric"]["verdict"] == "behind" and got["cmp"]["step_time"]["verdict"] == "behind"

    # traincard render of a Metaflow task compares the same way; --baseline none leaves it out
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root))
    for extra, expected in (((), first), (("--baseline", "none"), None)):
        out = root / "rendered.html"
        cli = [sys.executable, "-m", "traincard_otel", "render", second, "-o", str(out), *extra]
        proc = subprocess.run(cli, cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        rendered = card_payload(out.read_text()).get("baseline")
        assert (rendered or {}).get("label") == expected


@pytest.mark.slow
def test_a_named_baseline_beats_the_latest_run(root: Path, first: str, second: str) -> None:
    run_id = first.split("/")[1]
    third = run_flow(root, "--scale", "0.8", BASELINE_FLOW_ATTR=f"BaselineFlow/{run_id}/train")
    b = final_card(root, third)["baseline"]
    assert b["label"] == first  # not the second run, the latest one
    assert [f["verdict"] for f in b["status"]] == ["ahead", "level"]
    assert b["status"][0]["text"].endswith("(20 % lower)")
    assert last_live_payload(root, third)["baseline"]["label"] == first
    assert loaded(root, third, run_id)["label"] == first  # a bare run id: the same flow and step


@pytest.mark.slow
def test_an_unreadable_named_baseline_is_a_note_and_the_card_still_renders(root: Path, first: str) -> None:
    pathspec = run_flow(root, TRAINCARD_BASELINE="BaselineFlow/424242/train")
    payload = final_card(root, pathspec)
    note = payload["baseline"]["note"]
    assert note.startswith("baseline BaselineFlow/424242/train could not be read: "), note
    assert payload["run"]["status"] == "finished" and payload["run"]["step"] == 300
    assert any(c["id"] == "loss" for c in payload["charts"])
    assert payload["baseline"]["series"] == []


@pytest.mark.slow
def test_on_the_s3_datastore_the_second_run_is_compared_with_the_first(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    import boto3

    from tests.support.s3_server import BUCKET, _boto_kwargs, metaflow_s3_env, s3_server

    shutil.copy(FLOW, tmp_path / "baseline_flow.py")
    with s3_server() as endpoint:
        s3 = metaflow_s3_env(endpoint)
        first = run_flow(tmp_path, **s3)
        # 15 s of training: time for the task process to find and read the baseline on a loaded
        # machine (each listing of the emulated bucket is a Metaflow s3op subprocess)
        second = run_flow(tmp_path, "--scale", "0.9", "--step_s", "0.05", **s3)
        assert not list(tmp_path.rglob("traincard/a0"))  # both stores live in the bucket only
        flow, run, step, task = second.split("/")
        client = boto3.client("s3", endpoint_url=endpoint, **_boto_kwargs())
        prefix = f"metaflow/mf.cards/{flow}/runs/{run}/steps/{step}/tasks/{task}/runtime/"
        [key] = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
        live = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())["data"]["baseline"]
        card = final_card(tmp_path, second, final=None, **s3)["baseline"]
        got = loaded(tmp_path, second, "auto", **s3)
    # the task process found the first run in the bucket and pushed the comparison live
    assert live["label"] == first and live["note"] is None, live
    assert [f["verdict"] for f in live["status"]] == ["ahead", "behind"]
    assert live["status"][0]["text"].endswith("(10 % lower)")
    assert live["status"][1]["text"].endswith("50 ms vs 10 ms (400 % slower)")
    assert {s["chart"] for s in live["series"]} == {"loss"} and len(live["series"]) == 2
    # so did load() in a client process
    assert got["label"] == first and got["cmp"]["metric"]["verdict"] == "ahead"
    # the card Metaflow keeps on S3 (final or not, as without a baseline) has it too, unless its
    # render subprocess ran out of its time for the baseline on a loaded machine: then it says so
    assert card["label"] == first or card["note"].endswith("not within 20 s"), card
