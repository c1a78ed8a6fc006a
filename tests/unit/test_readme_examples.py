"""The README's Python examples run as written and type-check.

Every fenced block whose info string is exactly ``python`` is run in a fresh process (in a
temporary folder, so the default local store lands there) and checked with ``mypy --strict``. A
fragment that cannot run on its own (it uses a Trainer built elsewhere, or needs a GPU) is fenced
as ``python skip``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, subprocess_env

_BLOCK = re.compile(r"^```python( skip)?\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[int, str, bool]]:
    text = (REPO / "README.md").read_text()
    return [
        (text[: m.start()].count("\n") + 1, m.group(2), m.group(1) is None) for m in _BLOCK.finditer(text)
    ]


def test_the_readme_has_runnable_examples() -> None:
    assert sum(runnable for _line, _code, runnable in _blocks()) >= 2


@pytest.mark.parametrize(
    "line,code", [(line, code) for line, code, runnable in _blocks() if runnable], ids=lambda v: str(v)[:12]
)
def test_a_readme_example_runs(tmp_path: Path, line: int, code: str) -> None:
    script = tmp_path / f"readme_line_{line}.py"
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(TRAINCARD_SYSTEM="false"),  # the default store: ./traincard-data
    )
    assert out.returncode == 0, f"README.md line {line}:\n{out.stderr[-3000:]}"


def test_the_readme_examples_type_check(tmp_path: Path) -> None:
    paths = []
    for line, code, runnable in _blocks():
        if runnable:
            path = tmp_path / f"readme_line_{line}.py"
            path.write_text(code)
            paths.append(str(path))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", "--no-incremental", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:]
