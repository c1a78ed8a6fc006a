"""The zero-code doors: `opentelemetry-instrument python train.py` on a script that never names the
package, and autolog()'s hooks on frameworks imported after it, each in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO, subprocess_env
from tests.support.otlp_receiver import http_receiver

pytest.importorskip("transformers")

RUNNER = Path(sys.executable).parent / "opentelemetry-instrument"
SCRIPT = REPO / "tests" / "integration" / "scripts" / "plain_hf_train.py"


def _instrumented_run(tmp_path: Path, **env: str) -> list[dict[str, object]]:
    """Run the plain script under ``opentelemetry-instrument``; returns what the Trainer logged."""
    pytest.importorskip("opentelemetry.instrumentation")  # the `instrument` extra
    logged = tmp_path / "log_history.json"
    proc = subprocess.run(
        [str(RUNNER), sys.executable, str(SCRIPT), str(logged)],
        cwd=tmp_path,
        env=subprocess_env(
            TRAINCARD_DIR=str(tmp_path), TRAINCARD_RUN_NAME="run", TRAINCARD_SYSTEM="false", **env
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    history: list[dict[str, object]] = json.loads(logged.read_text())
    return history


@pytest.mark.slow
def test_opentelemetry_instrument_reports_an_unmodified_script(tmp_path: Path) -> None:
    assert "traincard" not in SCRIPT.read_text().lower()  # the package is never named
    with http_receiver() as (endpoint, got):  # OTEL_* decide only where else the signals go
        history = _instrumented_run(
            tmp_path,
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        )
    run = traincard_otel.load(tmp_path / "run")
    for key in ("loss", "eval_loss"):
        expected = [(h["step"], h[key]) for h in history if key in h]
        assert (
            expected and list(zip(run.metrics[key].steps, run.metrics[key].values, strict=True)) == expected
        )
    assert run.step_times[0].steps == list(range(1, 7))
    assert [c["step"] for c in run.checkpoints] == [6] and run.status["status"] == "finished"
    assert [s["name"] for s in got.spans].count("training.run") == 1


@pytest.mark.slow
def test_opentelemetry_disabled_instrumentations_turns_it_off_by_name(tmp_path: Path) -> None:
    history = _instrumented_run(tmp_path, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="traincard")
    assert [h for h in history if "loss" in h]  # it trained
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_autolog_patches_frameworks_imported_after_it_and_undoes_it(tmp_path: Path) -> None:
    code = (
        "import importlib, sys, traincard_otel\n"
        "from traincard_otel import _autolog\n"
        "traincard_otel.autolog()\n"
        "assert not {'transformers', 'accelerate', 'lightning', 'pytorch_lightning'} & set(sys.modules)\n"
        "import accelerate, lightning.pytorch, pytorch_lightning, transformers\n"
        "transformers.Trainer  # a lazy module: the trainer module is imported here\n"
        "patched = dict(_autolog._patched)\n"
        "assert sorted(patched) == sorted(_autolog.PATCHED_CLASSES), sorted(patched)\n"
        "for name, (cls, own, ours) in patched.items():\n"
        "    assert cls is getattr(importlib.import_module(name), cls.__name__)\n"
        "    assert vars(cls)['__init__'] is ours and ours.__wrapped__ is own\n"
        "traincard_otel.autolog(disable=True)\n"
        "assert all(vars(cls)['__init__'] is own for cls, own, _ in patched.values())\n"
        "assert _autolog._FINDER not in sys.meta_path\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
