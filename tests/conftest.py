"""Shared fixtures: a clean environment per test and a fresh pipeline per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("USER", "traincard")


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key in list(os.environ):
        if key.startswith(("TRAINCARD_", "OTEL_")) or key in {
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "GROUP_RANK",
            "NODE_RANK",
            "TORCHELASTIC_RUN_ID",
        }:
            monkeypatch.delenv(key, raising=False)
    # pytest swaps the test process's file descriptors per test; our capture of fds 1 and 2 is
    # tested in child processes (tests/integration/test_console_capture.py and every flow).
    monkeypatch.setenv("TRAINCARD_CAPTURE_CONSOLE", "false")
    from traincard_otel import _pipeline, _safety

    _safety._seen.clear()
    yield

    _pipeline.shutdown(timeout_s=2.0)


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store directory for this test, with system sampling off unless a test turns it on."""
    d = tmp_path / "store"
    monkeypatch.setenv("TRAINCARD_DIR", str(d))
    monkeypatch.setenv("TRAINCARD_SYSTEM", "false")
    return d
