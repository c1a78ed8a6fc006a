"""The Python examples of the README and of the pages under docs/ run as written and type-check.

Every fenced block whose info string is exactly ``python`` is run in a fresh process (in a
temporary folder, so the default local store lands there) and checked with ``mypy --strict``. A
fragment that cannot run on its own (it uses a Trainer built elsewhere, a Metaflow step, or needs a
GPU) is fenced as ``python skip``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import REPO, subprocess_env

_BLOCK = re.compile(r"^```python( skip)?\n(.*?)^```", re.S | re.M)
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))


def _blocks() -> list[tuple[str, int, str, bool]]:
    """(page, line, code, runnable) of every Python block of the pages."""
    found = []
    for page in PAGES:
        text = page.read_text()
        name = str(page.relative_to(REPO))
        for m in _BLOCK.finditer(text):
            found.append((name, text[: m.start()].count("\n") + 1, m.group(2), m.group(1) is None))
    return found


def _runnable() -> list[tuple[str, int, str]]:
    return [(page, line, code) for page, line, code, runnable in _blocks() if runnable]


def _script(tmp_path: Path, page: str, line: int, code: str) -> Path:
    script = tmp_path / f"{Path(page).stem.replace('-', '_')}_line_{line}.py"
    script.write_text(code)
    return script


def test_the_pages_have_runnable_examples() -> None:
    pages = {page for page, _line, _code in _runnable()}
    assert {"docs/integrations.md", "docs/testing.md"} <= pages


@pytest.mark.parametrize(
    "page,line,code", _runnable(), ids=[f"{page}:{line}" for page, line, _code in _runnable()]
)
def test_an_example_runs(tmp_path: Path, page: str, line: int, code: str) -> None:
    script = _script(tmp_path, page, line, code)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(TRAINCARD_SYSTEM="false"),  # the default store: ./traincard-data
    )
    assert out.returncode == 0, f"{page} line {line}:\n{out.stderr[-3000:]}"


def test_the_examples_type_check(tmp_path: Path) -> None:
    paths = [str(_script(tmp_path, page, line, code)) for page, line, code in _runnable()]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", "--no-incremental", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:]
