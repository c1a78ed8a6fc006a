"""Compaction deletes what it merged on every datastore Metaflow writes to (S3 on moto, GCS and Azure
on their emulators, Metaflow's local datastore), so a long run's objects stay bounded there too."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from tests.support.helpers import subprocess_env
from tests.support.s3_server import metaflow_s3_env, s3_server
from tests.support.storage_emulators import BUCKET, azurite, gcs_emulator

pytest.importorskip("metaflow")

# Writes a run whose segments are compacted every 2 and whose parts merge every 2, through the
# store's backend for ``root``, then lists what is left and reads the run back.
CHILD = """
import json, math, sys
from traincard_otel._store import segment
from traincard_otel._store.backends import backend_from_spec
from traincard_otel._write.store.merge import Tiers
from traincard_otel._read.load.reader import read_store
from traincard_otel._write.store.writer import StoreWriter
backend = backend_from_spec(sys.argv[1])
w = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=60)
w.compact_segments, w.merger.tiers = 2, Tiers(fan_in=2)
for i in range(8):
    steps = list(range(10 * i + 1, 10 * i + 11))
    times, values = [float(s) for s in steps], [1.0 / s for s in steps]
    w.add_many([segment.metric_run("train", ["loss"], steps, times, values)])
    assert w.flush_now()
    assert w.merger.wait(30)
backend.delete(["a0/r0/gone.jsonl"])  # an object already gone: no error
run = read_store(backend)
print(json.dumps({"objects": sorted(backend.list()), "steps": list(run.metrics["loss"].steps),
                  "errors": w.write_errors, "merged": w.merger.merged}))
"""


@contextmanager
def _s3(_tmp: Path) -> Iterator[tuple[str, dict[str, str]]]:
    with s3_server() as endpoint:
        yield f"s3://{BUCKET}/runs/r", metaflow_s3_env(endpoint)


@contextmanager
def _gcs(_tmp: Path) -> Iterator[tuple[str, dict[str, str]]]:
    with gcs_emulator() as env:
        yield f"gs://{BUCKET}/runs/r", env


@contextmanager
def _azure(tmp: Path) -> Iterator[tuple[str, dict[str, str]]]:
    with azurite(tmp) as env:
        yield f"az://{BUCKET}/runs/r", env


@contextmanager
def _local(tmp: Path) -> Iterator[tuple[str, dict[str, str]]]:
    yield f"metaflow://local|{tmp / '.metaflow'}|Flow/1/train/2/traincard", {}


STORES: dict[str, Callable[[Path], AbstractContextManager[tuple[str, dict[str, str]]]]] = {
    "s3": _s3,
    "gcs": _gcs,
    "azure": _azure,
    "metaflow-local": _local,
}


@pytest.mark.slow
@pytest.mark.parametrize("store", sorted(STORES))
def test_merged_segments_and_parts_are_deleted_from_the_datastore(tmp_path: Path, store: str) -> None:
    with STORES[store](tmp_path) as (root, env):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, root],
            env=subprocess_env(**env),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["steps"] == list(range(1, 81)) and got["errors"] == 0 and got["merged"] >= 2
    objects = [name.rsplit("/", 1)[-1] for name in got["objects"]]
    # 8 segments became 4 parts, merged into 1 (and the state): nothing they hold is left behind
    assert sorted(objects) == ["part-00000001-00000008.parquet", "state.json"], objects
