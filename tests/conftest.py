"""Shared fixtures (a clean environment and a fresh pipeline per test) and the suite's order.

``make test`` runs the suite on several pytest-xdist workers (``--dist loadgroup``): the tests
that share a module- or class-scoped fixture (one flow run read by several tests) go to one worker
together, and the slowest tests start first, so that the run does not end waiting on one of them.
Each worker has its own temporary directory, ports and (session-scoped) Chromium.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("USER", "traincard")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # The workers share the cores: one compute thread each (and in their child processes), not a
    # pool per core in every worker spinning against the others'.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per core (up to 8), since most tests wait on child processes, servers
    and sleeps; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


#: What starts first: real flows and multi-process training, then the other integration and browser
#: tests, then the unit tests.
_FIRST = ("slow", "integration", "browser")


def _weight(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    parts = item.path.relative_to(REPO / "tests").parts
    return _FIRST.index(parts[0]) if parts[0] in _FIRST else len(_FIRST)


def _shared_scope(item: pytest.Item) -> str | None:
    """The node whose fixtures this test shares with others (its module or class), if any."""
    info = getattr(item, "_fixtureinfo", None)
    scopes = {defs[-1].scope for defs in (info.name2fixturedefs.values() if info else ()) if defs}
    for scope, node_type in (("module", pytest.Module), ("class", pytest.Class)):
        if scope in scopes:
            node = item.getparent(node_type)
            return node.nodeid if node else None
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    weights: dict[pytest.Collector | None, int] = {}
    for item in items:  # a module runs as one block (its module fixtures set up once), by its slowest test
        module = item.getparent(pytest.Module)
        weights[module] = min(weights.get(module, len(_FIRST)), _weight(item))
    items.sort(key=lambda item: weights[item.getparent(pytest.Module)])  # stable: file order within
    groups_file = os.environ.get(_GROUPS)
    if os.environ.get("PYTEST_XDIST_WORKER") and groups_file:
        groups = {}
        for item in items:
            mark = item.get_closest_marker("xdist_group")
            group = str(mark.args[0]) if mark and mark.args else _shared_scope(item)
            if group is not None:
                groups[item.nodeid] = group
        written = Path(f"{groups_file}.{os.environ['PYTEST_XDIST_WORKER']}")
        written.write_text(json.dumps(groups))
        written.replace(groups_file)  # every worker collects the same tests: any one's file will do


#: The file where the workers leave the test groups for the controller's scheduler. (xdist's own
#: loadgroup marks them by renaming the test ids, which pytest 9 no longer takes.)
_GROUPS = "PYTEST_TRAINCARD_GROUPS"


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") and config.getoption("dist", "no") == "loadgroup":
        fd, path = tempfile.mkstemp(prefix="pytest-groups-", suffix=".json")
        os.close(fd)
        os.environ[_GROUPS] = path  # the workers start after this, with it in their environment


def pytest_unconfigure(config: pytest.Config) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_GROUPS):
        Path(os.environ.pop(_GROUPS)).unlink(missing_ok=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: each group (tests sharing a module or class fixture, or an explicit
    ``xdist_group``) is one unit of work for one worker; every other test is a unit of its own."""
    groups_file = os.environ.get(_GROUPS)
    if config.getoption("dist") != "loadgroup" or not groups_file:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once every worker has collected
                self.groups = json.loads(Path(groups_file).read_text() or "{}")
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


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
