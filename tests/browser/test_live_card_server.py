"""The live card seen through Metaflow's `card server` while a real flow runs: the step advances."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.browser_helpers import screenshot
from tests.support.helpers import REPO, subprocess_env
from tests.support.otlp_receiver import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _step_in_card(driver: object) -> int | None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        driver.switch_to.default_content()  # type: ignore[attr-defined]
        frame = driver.find_element(By.ID, "card-frame")  # type: ignore[attr-defined]
        driver.switch_to.frame(frame)  # type: ignore[attr-defined]
        # The step itself, not the text: before the first step that reads "— / 4,000".
        step = driver.find_element(By.ID, "tc-step").get_attribute("data-step")  # type: ignore[attr-defined]
    except WebDriverException:
        return None
    return int(step) if step and step.isdigit() else None


def test_live_card_through_card_server_advances(browser, tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "integration" / "flows" / "failure_flow.py", tmp_path / "failure_flow.py")
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path), TRAINCARD_SYSTEM_INTERVAL="1")
    port = free_port()
    run = subprocess.Popen(
        [
            sys.executable,
            "failure_flow.py",
            "--no-pylint",
            "run",
            "--mode",
            "none",
            "--steps",
            "4000",
            "--step_sleep",
            "0.02",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its tasks and card processes end with it (killpg below)
    )
    server = None
    try:
        deadline = time.monotonic() + 60
        while (
            not list(tmp_path.glob(".metaflow/FailureFlow/latest_run"))
            and not list(tmp_path.glob("FailureFlow/latest_run"))
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        server = subprocess.Popen(
            [
                sys.executable,
                "failure_flow.py",
                "--no-pylint",
                "card",
                "server",
                "--port",
                str(port),
                "--poll-interval",
                "1",
                "--max-cards",
                "100",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seen: list[int] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and run.poll() is None:
            try:
                browser.get(f"http://127.0.0.1:{port}/")
                break
            except Exception:
                time.sleep(1)
        while time.monotonic() < deadline and run.poll() is None:
            step = _step_in_card(browser)
            if step is not None and (not seen or step != seen[-1]):
                seen.append(step)
                if len(seen) >= 3:
                    break
            time.sleep(1)
        browser.switch_to.default_content()
        screenshot(browser, "live-card-server")
        assert len(seen) >= 2 and seen == sorted(seen), f"steps seen in the live card: {seen}"
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(20)
        # The run's train task outlives a terminated runtime: the whole session goes.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(20)
