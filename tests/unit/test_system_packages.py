"""The set-up path a fresh machine takes: `make system-packages` installs only what is missing.

A fresh machine of the project's kind has Node.js (with its own npm), none of Chromium,
ChromeDriver or Prometheus, and apt lists months old; asking apt for Debian's npm there fails the
whole install. These tests hide commands from PATH to recreate that state and run the real script
and the real apt resolver. The PATH they build is a folder anyone may enter, as /usr/bin is: apt
verifies what `apt-get update` fetches as its unprivileged `_apt` user, with gpgv from that PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "system-packages.sh"


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user may enter (pytest's `tmp_path` is its owner's alone)."""
    path = Path(tempfile.mkdtemp(prefix="traincard-system-packages-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def path_without(open_dir: Path, hidden: set[str]) -> str:
    """A PATH holding every command of the current one except `hidden`."""
    bin_dir = open_dir / "bin"
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


def old_apt_lists(open_dir: Path) -> tuple[Path, Path]:
    """An apt configuration whose lists are the machine's without their signed release files, as
    on a machine whose lists are months old: `apt-get update` fetches every repository's InRelease
    anew and verifies it (lists already current can leave it nothing to verify), then keeps the
    package indexes that still match. The machine's own lists stay as they were. Returns the
    configuration file (for APT_CONFIG) and the lists folder."""
    machine_lists = subprocess.run(
        ["apt-config", "shell", "LISTS", "Dir::State::lists/d"], check=True, capture_output=True, text=True
    ).stdout.strip()
    source = Path(machine_lists.removeprefix("LISTS='").removesuffix("'"))
    lists = open_dir / "lists"
    (lists / "partial").mkdir(parents=True)
    for index in source.glob("*_Packages*"):
        shutil.copy2(index, lists / index.name)
    config = open_dir / "apt.conf"
    # No binary caches: those in /var/cache/apt describe the machine's lists, not these.
    settings = {"Dir::State::Lists": f"{lists}/", "Dir::Cache::pkgcache": "", "Dir::Cache::srcpkgcache": ""}
    config.write_text("".join(f'{key} "{value}";\n' for key, value in settings.items()))
    return config, lists


def plan(path: str) -> list[str]:
    out = subprocess.run(
        ["bash", str(SCRIPT), "--plan"],
        env={**os.environ, "PATH": path},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line.split()[1] for line in out.splitlines()]


def test_plan_asks_only_for_missing_commands_and_never_for_npm_beside_node(open_dir: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("needs a machine with Node.js, as the project's machines have")
    path = path_without(open_dir, {"chromium", "chromedriver", "promtool"})
    assert plan(path) == ["chromium", "chromium-driver", "prometheus"]


def test_plan_asks_for_npm_only_on_a_machine_without_node(open_dir: Path) -> None:
    path = path_without(open_dir, {"node", "npm", "chromium", "chromedriver", "promtool"})
    assert plan(path) == ["chromium", "chromium-driver", "prometheus", "npm"]


def test_plan_is_empty_when_everything_is_there(open_dir: Path) -> None:
    missing = [
        c for c in ("chromium", "chromedriver", "promtool", "openssl", "node") if shutil.which(c) is None
    ]
    if missing:
        pytest.skip(f"not installed here: {missing}")
    assert plan(path_without(open_dir, set())) == []


@pytest.mark.skipif(shutil.which("apt-get") is None or os.geteuid() != 0, reason="needs apt-get as root")
def test_make_system_packages_succeeds_with_packages_missing(open_dir: Path) -> None:
    """The real make target as on a machine just started: Chromium's driver and Prometheus missing
    and apt's lists old, so `apt-get update` fetches and verifies each repository's release file
    before apt installs each package."""
    path = path_without(open_dir, {"chromedriver", "promtool"})
    config, lists = old_apt_lists(open_dir)
    done = subprocess.run(
        ["make", "-s", "system-packages"],
        cwd=REPO,
        env={**os.environ, "PATH": path, "APT_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # apt fetched and verified as its `_apt` user, as on any machine, not as root.
    assert "GPG error" not in done.stderr and "unsandboxed" not in done.stderr, done.stderr
    # apt keeps a fetched release file only once gpgv has verified it.
    assert list(lists.glob("*_InRelease")), sorted(p.name for p in lists.iterdir())
    assert "installing chromium-driver" in done.stdout
    assert "installing prometheus" in done.stdout
    assert "installing npm" not in done.stdout


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get")
def test_each_planned_package_resolves_beside_the_machines_node(open_dir: Path) -> None:
    """apt's own resolver (simulated install) accepts every package the plan could ask for."""
    path = path_without(open_dir, {"chromium", "chromedriver", "promtool", "openssl"})
    for package in plan(path):
        done = subprocess.run(["apt-get", "install", "-s", "-qq", package], capture_output=True, text=True)
        assert done.returncode == 0, f"apt-get install -s {package}: {done.stdout}{done.stderr}"
