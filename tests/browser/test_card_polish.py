"""Card polish in real headless Chromium: hostile text from a real `traincard render`, dark mode and
a laptop-width layout, the run-summary table, the log panel's filters, and the loss counters."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.load.reader import RunData
from traincard_otel._read.payload import build_payload

from tests.support.browser_helpers import screenshot
from tests.support.helpers import HF_BOOKKEEPING, series
from tests.support.runs import hf_run

pytestmark = pytest.mark.browser


def _wait_ready(browser: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""


def _open_payload(browser: Any, tmp_path: Path, payload: dict[str, Any], name: str = "card.html") -> None:
    path = tmp_path / name
    path.write_text(assemble_html(payload, live=False), encoding="utf-8")
    browser.get(path.as_uri())
    _wait_ready(browser)


def _hf_like_run() -> RunData:
    """The stored HF run as a Metaflow task, without its learning-rate and epoch curves (the layout
    checked below holds the loss and step-time charts alone), with its step times and the note of
    a machine without NVIDIA's driver."""
    data = hf_run()
    data.source = "HfFlow/1/train/2"
    for name in ("learning_rate", "epoch"):
        del data.metrics[name]
    data.states[0]["notes"] = [
        "No GPU figures: NVML could not start (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    ]
    data.step_times[0] = series("step_time", list(range(1, 151)), 0.02)
    return data


def test_unencodable_and_hostile_text_renders_inert(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from tests.support.runs import write_hostile_store

    store, out = tmp_path / "store", tmp_path / "card.html"
    write_hostile_store(store)
    cmd = [sys.executable, "-m", "traincard_otel", "render", str(store), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    browser.get(out.as_uri())
    _wait_ready(browser)
    assert browser.execute_script("return document.body.dataset.pwned === undefined")
    assert (
        browser.execute_script("return document.querySelectorAll('#tc-root script, #tc-root img').length")
        == 0
    )
    logs = browser.find_element(By.ID, "tc-logs").text
    assert "<script>document.body.dataset.pwned='1'</script>" in logs and "\ufffd" in logs
    assert "exc bad \ufffd" in browser.find_element(By.ID, "tc-failure-message").text
    assert "/ckpt/bad \ufffd" in browser.find_element(By.ID, "tc-checkpoints").text
    assert "err bad \ufffd" in browser.find_element(By.ID, "tc-stats").text
    assert any("loss\ufffd" in t.text for t in browser.find_elements(By.CSS_SELECTOR, ".tc-chart-title"))


def test_summary_table_units_epoch_and_empty_reasons(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _open_payload(browser, tmp_path, build_payload(_hf_like_run(), final=True))
    charts = [
        e.get_attribute("data-chart-id")
        for e in browser.find_elements(By.CSS_SELECTOR, "#tc-charts .tc-chart")
    ]
    assert charts == ["loss", "step_time"]
    units = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".tc-chart-unit")]
    assert units == ["no unit", "seconds"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#tc-summary-table tbody tr")
    by_name = {r.get_attribute("data-name"): r.text for r in rows}
    assert set(by_name) == {*HF_BOOKKEEPING, "train_loss"}
    assert "samples/s" in by_name["eval_samples_per_second"] and "3 times" in by_name["eval_runtime"]
    assert "FLOP" in by_name["total_flos"] and "once" in by_name["train_runtime"]
    assert browser.find_element(By.CSS_SELECTOR, "#tc-epoch dd").text == "3.75 / 3.75"
    system = browser.find_element(By.ID, "tc-system").text
    assert "no NVIDIA driver found" in system and "NVMLError" not in system
    checkpoints = browser.find_element(By.ID, "tc-checkpoints").text
    assert "No checkpoints saved yet." in checkpoints
    screenshot(browser, "card-summary-table")


def test_dark_mode_and_laptop_width(browser: Any, tmp_path: Path) -> None:
    payload = build_payload(_hf_like_run(), final=True)
    size = browser.get_window_size()
    try:
        browser.set_window_size(1280, 900)
        looks = {}
        for scheme in ("light", "dark"):
            browser.execute_cdp_cmd(
                "Emulation.setEmulatedMedia",
                {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
            )
            _open_payload(browser, tmp_path, payload, f"{scheme}.html")
            looks[scheme] = browser.execute_script(
                """
                const rgb = s => s.match(/\\d+/g).slice(0, 3).map(Number);
                const lum = c => (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]) / 255;
                const body = getComputedStyle(document.body);
                const chart = document.querySelector('.tc-chart');
                return {
                  bg: lum(rgb(body.backgroundColor)), fg: lum(rgb(body.color)),
                  panel: lum(rgb(getComputedStyle(chart).backgroundColor)),
                  overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
                  perRow: [...document.querySelectorAll('#tc-charts .tc-chart')]
                    .filter(c => c.getBoundingClientRect().top === chart.getBoundingClientRect().top).length,
                  plotWidth: chart.querySelector('canvas').getBoundingClientRect().width,
                };
                """
            )
            screenshot(browser, f"card-1280-{scheme}")
        assert looks["light"]["bg"] > 0.8 and looks["light"]["fg"] < 0.3
        assert looks["dark"]["bg"] < 0.2 and looks["dark"]["fg"] > 0.7 and looks["dark"]["panel"] < 0.3
        for look in looks.values():
            assert look["overflow"] <= 0  # nothing wider than a laptop screen
            assert look["perRow"] >= 2 and look["plotWidth"] >= 300
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        browser.set_window_size(size["width"], size["height"])


def _chatty_run(lines: int) -> RunData:
    data = RunData(source="chatty")
    data.states = [{"attempt": 0, "rank": 0, "status": "running", "started_at": 0.0, "updated_at": 1.0}]
    for i in range(lines):
        level = "ERROR" if i == 5 else "WARNING" if i % 97 == 0 else "INFO"
        message = f"rank{i % 3} line {i}" + (" needle" if i % 250 == 0 else "")
        attrs = {"traincard.rank": i % 3, "log.iostream": "stderr" if level != "INFO" else "stdout"}
        data.logs.append(
            {"time": float(i), "level": level, "message": message, "rank": 0, "attributes": attrs}
        )
    data.logs.append(
        {
            "time": float(lines),
            "level": "ERROR",
            "message": "step died\nTraceback (most recent call last):\n"
            '  File "t.py", line 3\nValueError: boom',
            "rank": 2,
            "attributes": {"log.iostream": "stderr"},
        }
    )
    return data


def _visible(browser: Any) -> list[str]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#tc-logs .tc-log')].filter(r => !r.hidden)"
        ".map(r => r.querySelector('.tc-log-msg').textContent)"
    )


def test_log_panel_filters_by_level_rank_and_text_and_counts_what_was_trimmed(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open_payload(browser, tmp_path, build_payload(_chatty_run(20_000), final=True))
    trimmed = browser.find_element(By.ID, "tc-log-trimmed").text
    shown = len(_visible(browser))
    assert f"{20_001 - shown:,} of 20,001 lines" in trimmed
    assert "rank2 line 5" in _visible(browser)  # an early error is kept past the tail
    last = browser.find_elements(By.CSS_SELECTOR, "#tc-logs .tc-log")[-1]
    assert last.find_element(By.CSS_SELECTOR, ".tc-log-msg").text == "step died"
    tb = last.find_element(By.CSS_SELECTOR, "details.tc-tb")
    assert tb.get_attribute("open") is None and "ValueError: boom" in tb.get_attribute("textContent")
    assert last.find_element(By.CSS_SELECTOR, ".tc-log-stream").text == "stderr"
    # Follow: the newest line is in view.
    assert browser.execute_script(
        "const l = document.querySelector('#tc-logs .tc-log-list');"
        "return l.scrollHeight - l.scrollTop - l.clientHeight < 30"
    )
    assert browser.find_element(By.ID, "tc-log-follow").is_selected()

    rank = Select(browser.find_element(By.ID, "tc-log-rank"))
    assert [o.text for o in rank.options] == ["All ranks", "rank 0", "rank 1", "rank 2"]
    rank.select_by_value("1")
    assert _visible(browser) and all(m.startswith("rank1 ") for m in _visible(browser))
    Select(browser.find_element(By.ID, "tc-log-level")).select_by_value("WARNING")
    assert _visible(browser) and all(
        m.startswith("rank1 ") and int(m.split()[-1]) % 97 == 0 for m in _visible(browser)
    )
    Select(browser.find_element(By.ID, "tc-log-level")).select_by_value("all")
    rank.select_by_value("all")
    search = browser.find_element(By.ID, "tc-log-search")
    search.send_keys("needle")
    found = _visible(browser)
    assert found and all(m.endswith("needle") for m in found)
    assert "of" in browser.find_element(By.ID, "tc-log-count").text
    search.clear()
    search.send_keys("no such text")
    assert _visible(browser) == [] and browser.find_element(
        By.CSS_SELECTOR, "#tc-logs .tc-note:not([hidden])"
    )
    # Scrolling up to read stops following.
    search.clear()
    search.send_keys(" ")
    search.send_keys("\b")
    browser.execute_script("document.querySelector('#tc-logs .tc-log-list').scrollTop = 0")
    time.sleep(0.3)
    assert not browser.find_element(By.ID, "tc-log-follow").is_selected()


def test_footer_shows_every_loss_counter(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    now = time.time()
    data = RunData(source="lossy")
    data.stats = {"dropped": {"buffer_full": 12}}
    data.states = [
        {
            "attempt": 0,
            "rank": 0,
            "status": "running",
            "started_at": now - 60,
            "updated_at": now,
            "rejected": {"not_a_number:loss": 3},
            "store_health": {
                "write_errors": 2,
                "last_error": "S3 unreachable <b>x</b>",
                "last_error_at": now - 10,
                "pending_rows": 1500,
                "retrying": True,
            },
        }
    ]
    _open_payload(browser, tmp_path, build_payload(data, now=now))
    stats = browser.find_element(By.ID, "tc-stats").text
    assert "12 dropped (buffer_full 12)" in stats
    assert "3 rejected (not_a_number:loss 3)" in stats
    assert "2 write errors" in stats and "S3 unreachable <b>x</b>" in stats
    assert "1,500 rows waiting to be written (retrying)" in stats
    banner = browser.find_element(By.CSS_SELECTOR, '#tc-banners .tc-banner[data-kind="store"]')
    assert "Store errors" in banner.text and "S3 unreachable" in banner.text
