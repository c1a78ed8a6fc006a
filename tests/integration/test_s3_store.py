"""The example flow on Metaflow's S3 datastore, against an S3-compatible server on loopback."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env
from tests.support.s3_server import BUCKET, _boto_kwargs, metaflow_s3_env, s3_server

pytest.importorskip("moto")
pytest.importorskip("metaflow")
_PAYLOAD = re.compile(r'<script type="application/json" id="tc-payload">(.*?)</script>', re.S)


@pytest.mark.slow
def test_flow_on_s3_card_and_load_read_back_from_the_bucket(tmp_path: Path) -> None:
    import boto3

    for name in ("hf_finetune_flow.py", "tiny_gpt2.py"):
        shutil.copy(REPO / "examples" / name, tmp_path / name)
    with s3_server() as endpoint:
        env = subprocess_env(
            **metaflow_s3_env(endpoint),
            METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path),
            TRAINCARD_SYSTEM="false",
        )
        proc = subprocess.run(
            [
                sys.executable,
                "hf_finetune_flow.py",
                "--no-pylint",
                "--datastore=s3",
                "run",
                "--max_steps",
                "40",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        run_id, task_id = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr).groups()  # type: ignore[union-attr]
        pathspec = f"FinetuneFlow/{run_id}/train/{task_id}"

        keys = [
            o["Key"]
            for o in boto3.client("s3", endpoint_url=endpoint, **_boto_kwargs())
            .list_objects_v2(
                Bucket=BUCKET, Prefix=f"metaflow/FinetuneFlow/{run_id}/train/{task_id}/traincard/"
            )
            .get("Contents", [])
        ]
        assert any(k.endswith("state.json") for k in keys) and any("/seg-" in k for k in keys)
        assert not list(tmp_path.rglob("traincard/a0"))  # the store lives in the bucket only

        code = (
            "task = metaflow.Task(sys.argv[1])\n"
            "run = traincard_otel.load(task)\n"
            "print(json.dumps({'history': task['log_history'].data,\n"
            "                  'loss': list(run.metrics['loss'].values),\n"
            "                  'status': run.status['status'], 'source': run.source}))"
        )
        got = metaflow_client(code, pathspec, tmp_path, env)
        assert got["loss"] == [h["loss"] for h in got["history"] if "loss" in h]
        assert got["status"] == "finished"

        card = tmp_path / "card.html"
        proc = subprocess.run(
            [
                sys.executable,
                "hf_finetune_flow.py",
                "--no-pylint",
                "--datastore=s3",
                "card",
                "get",
                f"{run_id}/train/{task_id}",
                str(card),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        payload = card_payload(card.read_text())
        loss = next(c for c in payload["charts"] if c["id"] == "loss")
        assert next(s for s in loss["series"] if s["label"] == "train")["y"] == got["loss"]
