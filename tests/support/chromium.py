"""The headless Chromium fixtures: Debian Chromium through chromedriver (installed by `make test`),
one for the session, offered to every test as ``browser`` (``tests/conftest.py`` registers them)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


def _start() -> tuple[object, str]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1300,1600",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts), profile


def _stop(driver: Any, profile: str) -> None:
    with contextlib.suppress(Exception):
        driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def _chromium() -> Iterator[list[Any]]:
    """One Chromium for the session, as [driver, profile folder]."""
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("Debian chromium and chromium-driver are not installed (make test installs them)")
    held = list(_start())
    try:
        yield held
    finally:
        _stop(*held)


@pytest.fixture
def browser(_chromium: list[Any]) -> object:
    """The session's Chromium, started again if it went away since the last test (a browser that
    crashed under one test would otherwise fail every test after it)."""
    from selenium.common.exceptions import WebDriverException

    try:
        _chromium[0].execute_script("return 1")
    except WebDriverException:
        _stop(*_chromium)
        _chromium[:] = _start()
    return _chromium[0]
