"""The store on Google Cloud Storage and Azure Blob, against their emulators (gcp-storage-emulator,
Azurite), through Metaflow's own GCS and Azure datastore code and client factories: a script writes
with ``TRAINCARD_DIR=gs://...`` / ``az://...``, a second process reads it live and renders the card
mid-run, and after the script simply returns (no ``close()``), ``load()`` reads the whole run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env
from tests.support.storage_emulators import BUCKET, azurite, gcs_emulator
from tests.support.store_faults import Child, assert_whole_run, child_env, exit_without_close, load_in_child

pytest.importorskip("metaflow")

EMULATORS: dict[str, tuple[str, Callable[[Path], AbstractContextManager[dict[str, str]]]]] = {
    "gcs": ("gs", lambda _tmp: gcs_emulator()),
    "azure": ("az", azurite),
}


@pytest.fixture(params=sorted(EMULATORS))
def cloud(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    scheme, start = EMULATORS[request.param]
    with start(tmp_path) as env:
        yield f"{scheme}://{BUCKET}/runs", env


@pytest.mark.slow
def test_store_live_read_card_and_load_on_an_emulated_cloud_store(
    tmp_path: Path, cloud: tuple[str, dict[str, str]]
) -> None:
    root, emulator_env = cloud
    env = child_env(
        **emulator_env,
        TRAINCARD_DIR=root,
        TRAINCARD_RUN_NAME="r",
        METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path),
    )
    target = f"{root}/r"
    child = Child(env, tmp_path / "done")
    child.wait_for("step 300", lambda: child.step >= 300, 60)
    time.sleep(1.0)  # a few flushes

    live = load_in_child(target, env)  # a second process reads while the first writes
    steps = live["steps"]
    assert len(steps) >= 300 and steps == list(range(1, len(steps) + 1))
    assert live["status"] == "running"
    card = tmp_path / "card.html"
    proc = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "render", target, "-o", str(card)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss = next(c for c in card_payload(card.read_text())["charts"] if c["id"] == "loss")
    assert len(loss["series"][0]["y"]) >= 300

    code, err = child.finish()
    assert code == 0, err[-3000:]
    assert "could not be written" not in err, err[-3000:]
    got = load_in_child(target, env)
    assert_whole_run(got, child.last)
    (state,) = got["states"]
    assert state["store_health"]["write_errors"] == 0 and state["store_health"]["pending_rows"] == 0
    assert not list(tmp_path.rglob("seg-*"))  # the store lives in the emulator only


@pytest.mark.slow
def test_exit_without_close_keeps_everything_on_an_emulated_cloud_store(
    tmp_path: Path, cloud: tuple[str, dict[str, str]]
) -> None:
    root, emulator_env = cloud
    env = child_env(**emulator_env, TRAINCARD_DIR=root, TRAINCARD_RUN_NAME="r")
    exit_without_close(env, f"{root}/r", tmp_path)


@pytest.mark.slow
def test_a_flow_on_an_emulated_cloud_datastore_has_its_card_and_load_reads_it(
    tmp_path: Path, cloud: tuple[str, dict[str, str]]
) -> None:
    root, emulator_env = cloud
    ds = "gs" if root.startswith("gs://") else "azure"
    shutil.copy(REPO / "tests" / "integration" / "flows" / "cloud_flow.py", tmp_path / "cloud_flow.py")
    sysroot = f"gs://{BUCKET}/metaflow" if ds == "gs" else f"{BUCKET}/metaflow"
    env = subprocess_env(
        **emulator_env,
        **{f"METAFLOW_DATASTORE_SYSROOT_{ds.upper() if ds == 'gs' else 'AZURE'}": sysroot},
        METAFLOW_DEFAULT_DATASTORE=ds,
        METAFLOW_DEFAULT_METADATA="local",
        METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path),
        TRAINCARD_SYSTEM="false",
    )
    flow = [sys.executable, "cloud_flow.py", "--no-pylint", f"--datastore={ds}"]
    proc = subprocess.run([*flow, "run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id, task_id = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr).groups()  # type: ignore[union-attr]
    assert not list(tmp_path.rglob("seg-*"))  # the store lives in the emulated bucket only

    code = (
        "run = traincard_otel.load(sys.argv[1])\n"
        "print(json.dumps({'steps': list(run.metrics['loss'].steps), 'status': run.status['status']}))"
    )
    got = metaflow_client(code, f"CloudFlow/{run_id}/train/{task_id}", tmp_path, env)
    assert got == {"steps": list(range(1, 301)), "status": "finished"}

    card = tmp_path / "card.html"
    proc = subprocess.run(
        [*flow, "card", "get", f"{run_id}/train/{task_id}", str(card)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss = next(c for c in card_payload(card.read_text())["charts"] if c["id"] == "loss")
    assert next(s for s in loss["series"] if s["label"] == "train")["y"] == [1.0 / s for s in range(1, 301)]
