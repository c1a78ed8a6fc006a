"""The set-up path a fresh machine takes: `make system-packages` installs only what is missing.

A fresh machine of the project's kind has Node.js (with its own npm) and none of Chromium,
ChromeDriver or Prometheus; asking apt for Debian's npm there fails the whole install. These tests
hide commands from PATH to recreate that state and run the real script and the real apt resolver.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "system-packages.sh"


def path_without(tmp_path: Path, hidden: set[str]) -> str:
    """A PATH holding every command of the current one except `hidden`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            link = bin_dir / name
            if name in hidden or link.exists() or link.is_symlink():
                continue
            target = Path(entry) / name
            if os.access(target, os.X_OK) and not target.is_dir():
                link.symlink_to(target)
    return str(bin_dir)


def plan(path: str) -> list[str]:
    out = subprocess.run(
        ["bash", str(SCRIPT), "--plan"],
        env={**os.environ, "PATH": path},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line.split()[1] for line in out.splitlines()]


def test_plan_asks_only_for_missing_commands_and_never_for_npm_beside_node(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("needs a machine with Node.js, as the project's machines have")
    path = path_without(tmp_path, {"chromium", "chromedriver", "promtool"})
    assert plan(path) == ["chromium", "chromium-driver", "prometheus"]


def test_plan_asks_for_npm_only_on_a_machine_without_node(tmp_path: Path) -> None:
    path = path_without(tmp_path, {"node", "npm", "promtool"})
    assert plan(path) == ["prometheus", "npm"]


def test_plan_is_empty_when_everything_is_there(tmp_path: Path) -> None:
    missing = [
        c for c in ("chromium", "chromedriver", "promtool", "openssl", "node") if shutil.which(c) is None
    ]
    if missing:
        pytest.skip(f"not installed here: {missing}")
    assert plan(path_without(tmp_path, set())) == []


@pytest.mark.skipif(shutil.which("apt-get") is None or os.geteuid() != 0, reason="needs apt-get as root")
def test_make_system_packages_succeeds_with_packages_missing(tmp_path: Path) -> None:
    """The real make target, with Chromium's driver and Prometheus hidden, runs apt for each."""
    path = path_without(tmp_path, {"chromedriver", "promtool"})
    done = subprocess.run(
        ["make", "-s", "system-packages"],
        cwd=REPO,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installing chromium-driver" in done.stdout
    assert "installing prometheus" in done.stdout
    assert "installing npm" not in done.stdout


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get")
def test_each_planned_package_resolves_beside_the_machines_node(tmp_path: Path) -> None:
    """apt's own resolver (simulated install) accepts every package the plan could ask for."""
    path = path_without(tmp_path, {"chromium", "chromedriver", "promtool", "openssl"})
    for package in plan(path):
        done = subprocess.run(["apt-get", "install", "-s", "-qq", package], capture_output=True, text=True)
        assert done.returncode == 0, f"apt-get install -s {package}: {done.stdout}{done.stderr}"
