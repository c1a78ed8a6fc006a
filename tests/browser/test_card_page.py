"""The card in real headless Chromium: sections, values, interactions, live updates, escaping."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.card.render import render_data
from traincard_otel._read.load.reader import RunData, Series
from traincard_otel._read.payload import build_payload

from tests.support.browser_helpers import open_html, screenshot

pytestmark = pytest.mark.browser
XSS_LOG = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'


def _record_run(store_dir: Path, tmp_path: Path, steps: int = 80, fail: bool = False) -> RunData:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "model.bin").write_bytes(b"w" * 4096)
    r = traincard_otel.configure()
    r.progress(max_steps=200, batch_size=32, world_size=1, num_epochs=2)
    with r.phase("train"):
        for s in range(1, steps + 1):
            r.metrics({"loss": 3.0 / s, "learning_rate": 1e-3, "grad_norm": 1.0 + (s % 7) / 10}, step=s)
            r.step_end(s, duration_s=0.02, samples=32, tokens=4096)
            if s % 20 == 0:
                r.metrics({"eval_loss": 3.2 / s}, step=s, phase="eval")
                r.checkpoint(ckpt, step=s, metadata={"metric": "eval_loss", "value": 3.2 / s})
        r.log("loaded shard 3 of 8")
        r.log("loss is spiky", "WARNING")
        r.log(
            "nccl hiccup",
            "ERROR",
            traceback='Traceback (most recent call last):\n  File "x.py"\nRuntimeError: hiccup',
        )
        r.log(XSS_LOG, "ERROR")
        if fail:
            try:
                raise RuntimeError(f"CUDA out of memory. Tried to allocate 2.00 GiB <b>{XSS_LOG}</b>")
            except RuntimeError as exc:
                r.failure(exc)
    traincard_otel.shutdown()
    return traincard_otel.load(store_dir)


def test_final_card_sections_values_and_interactions(browser, store_dir: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    data = _record_run(store_dir, tmp_path)
    html = render_data(data, live=False, final=True)
    assert not re.search(r"window\.metaflow_card_update\s*=", html)
    open_html(browser, html, tmp_path)
    find = browser.find_element
    assert "finished" in find(By.CSS_SELECTOR, "#tc-status .tc-pill").text.lower()
    assert find(By.ID, "tc-step").text.endswith("80 / 200")
    for chart_id in ("loss", "learning_rate", "grad_norm", "throughput_tokens_per_second", "step_time"):
        chart = find(By.CSS_SELECTOR, f'.tc-chart[data-chart-id="{chart_id}"]')
        assert chart.find_elements(By.TAG_NAME, "canvas"), chart_id
    loss = find(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    assert int(loss.get_attribute("data-points")) == 80 + 4  # train + eval points
    rows = browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints tr.best")
    assert len(rows) == 1 and "★" in rows[0].text and "eval_loss" in rows[0].text
    screenshot(browser, "final")

    logs = browser.find_elements(By.CSS_SELECTOR, "#tc-logs .tc-log")
    assert len(logs) == 4
    search = find(By.ID, "tc-log-search")
    search.send_keys("shard")
    visible = [n for n in logs if n.is_displayed()]
    assert len(visible) == 1 and "loaded shard 3 of 8" in visible[0].text
    search.clear()
    search.send_keys(" ")
    search.clear()
    browser.execute_script(
        "var s=document.getElementById('tc-log-search'); s.value=''; s.dispatchEvent(new Event('input'))"
    )
    Select(find(By.ID, "tc-log-level")).select_by_value("ERROR")
    assert [n.get_attribute("data-level") for n in logs if n.is_displayed()] == ["ERROR", "ERROR"]
    details = find(By.CSS_SELECTOR, "#tc-logs details.tc-tb")
    assert details.get_attribute("open") is None
    details.find_element(By.TAG_NAME, "summary").click()
    assert details.get_attribute("open") is not None
    assert "RuntimeError: hiccup" in details.find_element(By.TAG_NAME, "pre").text
    details.find_element(By.TAG_NAME, "summary").click()
    assert details.get_attribute("open") is None


def test_failure_summary_and_escaping(browser, store_dir: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    data = _record_run(store_dir, tmp_path, steps=30, fail=True)
    open_html(browser, render_data(data, live=False, final=True), tmp_path)
    failure = browser.find_element(By.ID, "tc-failure")
    assert "RuntimeError: CUDA out of memory" in failure.text
    assert (
        browser.find_element(By.CSS_SELECTOR, "#tc-failure .tc-verdict").get_attribute("data-verdict")
        == "cuda_oom"
    )
    assert "loss" in failure.text  # last metrics table
    assert (
        browser.find_element(By.CSS_SELECTOR, "#tc-banners .tc-banner").get_attribute("data-kind") == "failed"
    )
    # Everything from telemetry is text: no injected element, no script ran.
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return window.__xss === undefined")
    assert XSS_LOG in browser.find_element(By.ID, "tc-logs").text
    screenshot(browser, "failed")
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    browser.refresh()
    screenshot(browser, "failed-dark")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def _series(name: str, steps: range) -> Series:
    n = len(steps)
    return Series(
        name=name,
        steps=list(steps),
        values=[1.0 / s for s in steps],
        times=[float(s) for s in steps],
        attempts=[0] * n,
        ranks=[0] * n,
    )


def _running(steps: int) -> RunData:
    data = RunData(source="LiveFlow/1/train/1")
    data.metrics["loss"] = _series("loss", range(1, steps + 1))
    data.states = [
        {
            "attempt": 0,
            "rank": 0,
            "status": "running",
            "step": steps,
            "progress": {"max_steps": 1000},
            "started_at": time.time() - 60,
            "updated_at": time.time(),
            "heartbeat_at": time.time(),
        }
    ]
    return data


def test_live_page_updates_in_place(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    html = assemble_html(build_payload(_running(100)), live=True)
    assert "[METAFLOW_RELOAD_TOKEN]" in html
    open_html(browser, html, tmp_path)
    chart = browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    assert chart.get_attribute("data-points") == "100"
    browser.execute_script("window.__marker = 'same page'")
    for steps in (150, 210):
        browser.execute_script(
            "return window.metaflow_card_update(arguments[0])", build_payload(_running(steps), live=True)
        )
    assert browser.execute_script("return window.__marker") == "same page"  # no reload happened
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-updates") == "2"
    assert browser.find_element(By.ID, "tc-step").text.endswith("210 / 1000")
    chart = browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    assert chart.get_attribute("data-points") == "210"
    screenshot(browser, "running")


def test_a_million_step_card_renders(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    data = _running(1_000_000)
    t0 = time.perf_counter()
    html = assemble_html(build_payload(data, final=True), live=False)
    build_s = time.perf_counter() - t0
    assert len(html) < 5 * 2**20
    open_html(browser, html, tmp_path)
    chart = browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    assert chart.find_elements(By.TAG_NAME, "canvas")
    assert int(chart.get_attribute("data-points")) <= 2000
    print(f"1M-step card: {len(html) / 1024:.0f} KiB built in {build_s:.2f} s")


def test_a_page_opened_mid_run_is_back_filled_by_live_updates(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_html(browser, assemble_html(build_payload(_running(10)), live=True), tmp_path)
    update = build_payload(_running(50_000), live=True)
    loss = next(s for c in update["charts"] if c["id"] == "loss" for s in c["series"])
    assert len(loss["x"]) <= 150 and loss["head_x"][0] == 1  # a short tail plus a coarse whole-run head
    browser.execute_script("return window.metaflow_card_update(arguments[0])", update)
    chart = browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    points = int(chart.get_attribute("data-points"))
    assert 10 + len(loss["x"]) < points <= 10 + len(loss["x"]) + len(loss["head_x"])
    xs = browser.execute_script("return window.TC.charts().get('loss').spec.series[0].x")
    assert xs[0] == 1 and xs == sorted(xs) and xs[-1] == 50_000
