"""Shared fixtures (a clean environment and a fresh pipeline per test) and the suite's order.

``make test`` runs the suite on three pytest-xdist workers, one module per worker at a time
(``--dist loadfile``), so the tests that share a module-scoped flow run stay together; the longest
modules start first, then the others that run real flows and multi-process training, so the run
does not end waiting on one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: The headless Chromium fixtures (``browser``), for the browser tests and the flows whose card is
#: looked at in a browser.
pytest_plugins = ["tests.support.chromium"]

TESTS = Path(__file__).resolve().parent
os.environ.setdefault("USER", "traincard")
if os.environ["USER"] in ("", "root"):  # Metaflow takes no user name from these (a root container's)
    os.environ.setdefault("METAFLOW_USER", "traincard")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # The workers share the cores: one compute thread each (inherited by their child processes),
    # not a thread pool per core in each worker spinning against the others'.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

#: What starts first: real flows and multi-process training, then the browser tests, then the rest.
_FIRST = ("slow", "browser")
#: Before those, the modules that take longest (about 60-120 s each on two cores), longest first: a
#: worker that picked one of them up late would leave the other idle at the end of the run.
_LONGEST = (
    "integration/test_gang_flow.py",
    "benchmarks/test_benchmarks_run.py",
    "integration/test_baseline_flow.py",
    "integration/test_sweep_flow.py",
)


def _weight(item: pytest.Item) -> int:
    module = item.path.relative_to(TESTS)
    if module.as_posix() in _LONGEST:
        return _LONGEST.index(module.as_posix()) - len(_LONGEST)
    if item.get_closest_marker("slow"):
        return 0
    top = module.parts[0]
    return _FIRST.index(top) if top in _FIRST else len(_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A report's captured text crosses to the xdist controller as UTF-8, which a lone surrogate (the
    hostile-input tests log some) cannot be: such a character is kept as its escape."""
    report.sections = [(title, _encodable(text)) for title, text in report.sections]
    if isinstance(report.longrepr, str):
        report.longrepr = _encodable(report.longrepr)


def _encodable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules first, then modules in order of their heaviest test (a stable sort: each
    module's own order is kept)."""
    first: dict[Path, int] = {}
    for item in items:
        first[item.path] = min(first.get(item.path, len(_FIRST)), _weight(item))
    items.sort(key=lambda item: first[item.path])


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
    from traincard_otel import _safety
    from traincard_otel._write import pipeline as _pipeline

    _safety._seen.clear()
    yield

    _pipeline.shutdown(timeout_s=2.0)


@pytest.fixture
def cuda() -> Any:
    """torch, on a machine where it sees a CUDA device (the tests marked gpu); else skipped."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store of this test's run (``TRAINCARD_RUN_NAME`` names it: every pipeline the test
    starts, and the state it writes by hand, belong to one run), with system sampling off unless a
    test turns it on."""
    d = tmp_path / "store"
    monkeypatch.setenv("TRAINCARD_DIR", str(tmp_path))
    monkeypatch.setenv("TRAINCARD_RUN_NAME", d.name)
    monkeypatch.setenv("TRAINCARD_SYSTEM", "false")
    return d


@pytest.fixture
def autologging() -> Iterator[None]:
    """``traincard_otel.autolog()`` for the test, undone after it."""
    import traincard_otel

    traincard_otel.autolog()
    yield
    traincard_otel.autolog(disable=True)


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist (3.8 and later) runs the modules with the most tests first, whatever the order
    above, unless told to keep it: the longest modules would then start last."""
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False
