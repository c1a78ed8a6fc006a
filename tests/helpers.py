"""Helpers shared by tests (importable as ``helpers`` thanks to conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for child Python processes: this venv first on PATH, no inherited OTel/traincard vars."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_", "PYTEST_"))}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("USER", "traincard")
    env.update(extra)
    return env
