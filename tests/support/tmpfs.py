"""A tiny tmpfs for storage fault tests: a disk that really fills up, or turns read-only."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class Tmpfs:
    """A tmpfs mounted at ``path``; :meth:`remount` changes its size or makes it read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True, capture_output=True)


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Tmpfs]:
    """Mount a tmpfs of ``size`` at ``path``; skip the test where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield Tmpfs(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
