"""A foreach sweep run once for real (Metaflow in a subprocess, local datastore): every branch's
card carries the Sweep section, the join's card compares the branches, a diverged branch is shown
as failed without hiding the others, ``traincard render`` on the step draws the comparison card,
and ``traincard_otel.sweep()`` returns one row per branch."""

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
FLOW = REPO / "tests" / "integration" / "flows" / "sweep_flow.py"


def run_sweep(root: Path, env: dict[str, str]) -> str:
    """Run the flow (copied into ``root``) and return its run id."""
    shutil.copy(FLOW, root / FLOW.name)
    proc = subprocess.run(
        [sys.executable, FLOW.name, "--no-pylint", "run", "--model", "tiny"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    match = re.search(r"\[(\d+)/join/\d+ ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-3000:]
    return match.group(1)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    """(the flow's folder, its run id, the environment reading it) after one run."""
    root = tmp_path_factory.mktemp("sweep")
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(root), TRAINCARD_SYSTEM="false")
    return root, run_sweep(root, env), env


def _cards(root: Path, env: dict[str, str], step_spec: str) -> dict[str, dict[str, Any]]:
    """Task id -> its final traincard payload, for every task of ``step_spec``."""
    code = (
        "from metaflow.cards import get_cards\n"
        "step = metaflow.Step(sys.argv[1])\n"
        "out = {t.id: [c.get() for c in get_cards(t, type='traincard')] for t in step}\n"
        "print(json.dumps(out))"
    )
    pages = metaflow_client(code, step_spec, root, env)
    return {task: card_payload(html[0]) for task, html in pages.items()}


def _live(root: Path, run: str, task: str) -> dict[str, Any]:
    folder = root / ".metaflow" / "mf.cards" / "SweepFlow" / "runs" / run / "steps" / "train" / "tasks" / task
    [data] = list((folder / "runtime").glob("traincard*.data.json"))
    pushed: dict[str, Any] = json.loads(data.read_text())["data"]
    return pushed


def test_every_branch_card_lists_its_siblings_live_and_at_the_end(
    swept: tuple[Path, str, dict[str, str]],
) -> None:
    root, run, env = swept
    cards = _cards(root, env, f"SweepFlow/{run}/train")
    assert len(cards) == 3
    for task, payload in cards.items():
        section = payload["sweep"]
        assert section is not None and not section["standalone"] and section["metric"] == "loss"
        assert section["total"] == 3, section["rows"]
        [own] = [r for r in section["rows"] if r["self"]]
        assert own["id"] == task
        assert section["varying"][0] == "lr" and section["constant"] == {"model": "tiny", "warmup": 5}
        assert payload["charts"], "the branch's own training charts stay"
        live = _live(root, run, task)["sweep"]
        assert live is not None and any(r["self"] and r["id"] == task for r in live["rows"])
        assert any(c["self"] and len(c["points"]) >= 2 for c in live["curves"])


def test_the_join_card_compares_the_branches_and_shows_the_failed_one(
    swept: tuple[Path, str, dict[str, str]],
) -> None:
    root, run, env = swept
    [join] = _cards(root, env, f"SweepFlow/{run}/join").values()
    section = join["sweep"]
    assert section["standalone"] and section["total"] == 3 and section["hidden_rows"] == 0
    by_lr = {r["hp"]["lr"]: r for r in section["rows"]}
    assert sorted(by_lr) == [0.1, 0.3, 3.0]
    assert by_lr[3.0]["status"] == "failed" and "loss diverged" in (by_lr[3.0]["failure"] or "")
    assert by_lr[3.0]["step"] == 40
    assert by_lr[0.1]["status"] == by_lr[0.3]["status"] == "finished"
    assert by_lr[0.1]["step"] == by_lr[0.3]["step"] == 60
    assert section["best"] == by_lr[3.0]["id"] or section["best"] == by_lr[0.3]["id"]
    assert [r["id"] for r in section["rows"] if r["is_best"]] == [section["best"]]
    assert len(section["curves"]) == 3


def test_render_on_the_step_draws_the_comparison_card(
    swept: tuple[Path, str, dict[str, str]],
) -> None:
    root, run, env = swept
    # the step; the flow's last run; the whole run (the join, which compares them, is no branch)
    for target, extra in (
        (f"SweepFlow/{run}/train", []),
        ("SweepFlow", ["--last", "1"]),
        (f"SweepFlow/{run}", []),
    ):
        out = root / "compare.html"
        proc = subprocess.run(
            [sys.executable, "-m", "traincard_otel", "render", target, *extra, "-o", str(out)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "3 tasks compared" in proc.stdout
        section = card_payload(out.read_text())["sweep"]
        assert section["standalone"] and section["total"] == 3
        assert {r["status"] for r in section["rows"]} == {"finished", "failed"}


def test_sweep_to_pandas_has_a_row_per_branch(swept: tuple[Path, str, dict[str, str]]) -> None:
    root, run, env = swept
    code = (
        "frame = traincard_otel.sweep(sys.argv[1]).to_pandas()\n"
        "print(frame.sort_values('lr').to_json(orient='records'))"
    )
    rows = metaflow_client(code, f"SweepFlow/{run}/train", root, env)
    assert [r["lr"] for r in rows] == [0.1, 0.3, 3.0]
    assert [r["status"] for r in rows] == ["finished", "finished", "failed"]
    assert all(r["model"] == "tiny" and r["warmup"] == 5 for r in rows)
    assert rows[0]["loss.final"] == pytest.approx(2.0 / (1 + 0.1 * 60))
    assert rows[2]["loss.best"] == pytest.approx(2.0 / (1 + 3.0 * 40))
    assert rows[1]["eval_accuracy.best"] == 0.36
    assert all(r["pathspec"].startswith(f"SweepFlow/{run}/train/") for r in rows)
    assert all(r["duration_s"] > 0 for r in rows)


_S3_SUMMARIES = """
import json
from traincard_otel._store.backends import MetaflowBackend
from traincard_otel._read.load.summaries import StepFolder, _s3_listing, read_summary
from traincard_otel._write.store.writer import StoreWriter
root = "s3://%s/metaflow"
for task in ("7", "8", "9"):
    backend = MetaflowBackend("s3", root, f"SweepFlow/1/train/{task}/traincard")
    backend.write("a0/r0/w1/seg-00000001.jsonl", b"{}")  # telemetry the listing must not walk
    if task == "7":  # a store written before each writer kept its own summary
        backend.write("summary.json", json.dumps({"pathspec": "SweepFlow/1/train/7", "step": 7}).encode())
    elif task == "8":  # two writers: the step process and the rank it started
        for rank, step, started in ((0, None, 100.0), (0, 8, 101.0)):  # the rank started second
            writer = StoreWriter(backend, attempt=0, rank=rank)
            mine = {"step": step, "writer": writer.writer_id, "rank": rank, "started_at": started}
            writer.set_summary({**mine, "status": "finished"})
            assert writer.flush_now()
folder = StepFolder(MetaflowBackend("s3", root, "SweepFlow/1/train/7/traincard"))
found = folder.summaries()
listed = _s3_listing(folder.backend, "", "/traincard/a")
print(json.dumps({
    "ids": folder.task_ids(),
    "steps": {k: v["step"] for k, v in found.items()},
    "listed": sorted(listed),
    "again": folder.summaries() == found,
    "own": read_summary(MetaflowBackend("s3", root, "SweepFlow/1/train/8/traincard"))["step"],
}))
"""


def test_a_step_s_summaries_are_found_in_a_bucket(tmp_path: Path) -> None:
    """The S3 path of finding siblings (one listing of the step that folds each task's telemetry
    away, one object per writer), on the emulator; the flow itself runs on the local datastore
    above."""
    pytest.importorskip("moto")
    from tests.support.s3_server import BUCKET, metaflow_s3_env, s3_server

    with s3_server() as endpoint:
        env = subprocess_env(**metaflow_s3_env(endpoint))
        proc = subprocess.run(
            [sys.executable, "-c", _S3_SUMMARIES % BUCKET],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    listed = found.pop("listed")
    assert found == {"ids": ["7", "8", "9"], "steps": {"7": 7, "8": 8}, "again": True, "own": 8}
    assert [n for n in listed if "/traincard/" in n and "summary" not in n] == []  # no telemetry
    assert len([n for n in listed if "/traincard/summary/" in n]) == 2


@pytest.mark.slow
def test_the_same_sweep_on_the_s3_datastore(tmp_path: Path) -> None:
    """The whole sweep on S3 (the local S3 emulator): each branch finds its siblings' summaries in
    the bucket, the join's card compares them, and ``sweep()`` reads them back from it."""
    pytest.importorskip("moto")
    from tests.support.s3_server import metaflow_s3_env, s3_server

    with s3_server() as endpoint:
        env = subprocess_env(TRAINCARD_SYSTEM="false", **metaflow_s3_env(endpoint))
        run = run_sweep(tmp_path, env)
        [join] = _cards(tmp_path, env, f"SweepFlow/{run}/join").values()
        branches = _cards(tmp_path, env, f"SweepFlow/{run}/train")
        code = (
            "frame = traincard_otel.sweep(sys.argv[1]).to_pandas()\n"
            "print(frame.sort_values('lr').to_json(orient='records'))"
        )
        rows = metaflow_client(code, f"SweepFlow/{run}/train", tmp_path, env)
    # every branch's own card found its siblings in the bucket
    assert len(branches) == 3 and all(p["sweep"] and p["sweep"]["total"] == 3 for p in branches.values())
    assert not list(tmp_path.rglob("traincard/a0"))  # every store lives in the bucket only
    section = join["sweep"]
    assert section["standalone"] and section["total"] == 3
    assert sorted((r["hp"]["lr"], r["status"]) for r in section["rows"]) == [
        (0.1, "finished"),
        (0.3, "finished"),
        (3.0, "failed"),
    ]
    assert [(r["lr"], r["status"]) for r in rows] == [(0.1, "finished"), (0.3, "finished"), (3.0, "failed")]
    assert rows[0]["loss.final"] == pytest.approx(2.0 / (1 + 0.1 * 60))
