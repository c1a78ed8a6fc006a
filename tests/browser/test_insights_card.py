"""The insights panel in real headless Chromium, from a real training loop's store.

A regression loop with a planted bad batch (step 120) and a NaN input (step 140), an eval phase, a
save phase and a slow input pipeline reports through a real pipeline; the card built from what
it stored must list both anomalies with their steps, mark them on the loss chart, draw the
goodput bar and say that the MFU peak is unknown on a CPU. A live update replaces the panel.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from traincard_otel._analysis.flops import training_fields
from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.load.reader import RunData, read_store
from traincard_otel._read.payload import build_payload
from traincard_otel.testing import capture

from tests.support.browser_helpers import open_html, screenshot

pytestmark = pytest.mark.browser


def _run(steps: int = 160) -> RunData:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(1024, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(1024, 1)
    with capture(hourly_cost=3.0) as cap:
        r = cap.reporter
        r.progress(max_steps=steps, **training_fields(model, "fp32"))
        time.sleep(0.1)
        with r.phase("train"):
            last = time.perf_counter()
            for step in range(1, steps + 1):
                time.sleep(0.004)  # the input pipeline
                idx = torch.randint(0, 1024, (64,))
                xb, yb = x[idx].clone(), y[idx].clone()
                wait = time.perf_counter() - last
                if step == 120:
                    yb = yb * 30
                if step == 140:
                    xb[0, 0] = float("nan")
                loss = torch.nn.functional.mse_loss(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
                if step not in (120, 140):
                    opt.step()
                now = time.perf_counter()
                r.metrics({"loss": loss.detach(), "grad_norm": grad_norm}, step=step)
                r.step_end(step, duration_s=now - last, samples=64, tokens=64 * 8, data_wait_s=wait)
                last = now
                if step % 80 == 0:
                    with r.phase("eval"):
                        time.sleep(0.05)
                    with r.phase("save"):
                        time.sleep(0.03)
                    last = time.perf_counter()
    return read_store(cap.store)


@pytest.fixture(scope="module")
def run() -> RunData:
    return _run()


def _open(browser: Any, tmp_path: Path, payload: dict[str, Any], live: bool = False) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    open_html(browser, assemble_html(payload, live=live), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""


def test_attention_panel_lists_the_planted_anomalies_at_the_top(
    browser: Any, tmp_path: Path, run: RunData
) -> None:
    from selenium.webdriver.common.by import By

    payload = build_payload(run, final=True)
    _open(browser, tmp_path, payload)
    items = browser.find_elements(By.CSS_SELECTOR, "#tc-attention-list .tc-attention-item")
    rows = [(i.get_attribute("data-step"), i.get_attribute("data-kind"), i.text) for i in items]
    kinds = {(s, k) for s, k, _t in rows}
    assert ("120", "loss_spike") in kinds and ("140", "nan") in kinds, rows
    spike = next(t for s, k, t in rows if (s, k) == ("120", "loss_spike"))
    assert "step 120" in spike and "loss spike" in spike and "MADs above the median" in spike
    nan = [t for s, k, t in rows if (s, k) == ("140", "nan")]
    assert any("loss is nan at step 140" in t for t in nan) and any("grad_norm is nan" in t for t in nan)
    critical = {
        i.get_attribute("data-kind")
        for i in items
        if "tc-attention-item--critical" in i.get_attribute("class")
    }
    assert critical == {"nan"}, "the critical kind (and only it) is shown as an error"
    count = browser.find_element(By.ID, "tc-attention-count").text
    assert count == str(payload["insights"]["attention_total"])
    # the panel comes before the charts
    order = browser.execute_script(
        "var a = document.getElementById('tc-insights'), c = document.getElementById('tc-charts');"
        "return a.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING;"
    )
    assert order
    # and the anomalies are marked on the loss chart
    loss_markers = browser.execute_script(
        "var box = document.querySelector('[data-chart-id=\"loss\"]');"
        "return box ? box.getAttribute('data-markers') : null;"
    )
    anomaly_steps = {m["x"] for m in payload["markers"] if m["kind"] == "anomaly"}
    assert {120, 140} <= anomaly_steps
    assert loss_markers is not None and int(loss_markers) >= 2
    screenshot(browser, "card-insights-attention")


def test_goodput_bar_and_efficiency_facts(browser: Any, tmp_path: Path, run: RunData) -> None:
    from selenium.webdriver.common.by import By

    payload = build_payload(run, final=True)
    g = payload["insights"]["goodput"]
    assert g["seconds"]["data_wait"] > 0 and g["seconds"]["eval"] > 0 and g["seconds"]["checkpoint"] > 0
    _open(browser, tmp_path, payload)
    ratio = browser.find_element(By.ID, "tc-goodput-ratio").text
    shown, _sep, rest = ratio.partition("% productive of ")
    assert rest and float(shown) == pytest.approx(100 * g["ratio"], abs=0.51)
    segments = browser.find_elements(By.CSS_SELECTOR, "#tc-goodput-bar .tc-gp")
    keys = [s.get_attribute("data-key") for s in segments]
    assert keys[:2] == ["productive", "data_wait"] and "eval" in keys and "checkpoint" in keys
    widths = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#tc-goodput-bar .tc-gp'),"
        " function (s) { return s.getBoundingClientRect().width; });"
    )
    bar = browser.execute_script(
        "return document.getElementById('tc-goodput-bar').getBoundingClientRect().width"
    )
    assert sum(widths) == pytest.approx(bar, rel=0.02)
    # the legend names every category of at least 0.5 % of the wall time (a real run's eval and
    # checkpoint shares depend on the machine's load), and only those
    listed = {
        li.get_attribute("data-key")
        for li in browser.find_elements(By.CSS_SELECTOR, "#tc-goodput-legend .tc-goodput-item")
    }
    big = {
        c["key"] for c in g["categories"] if c["seconds"] >= 0.005 * g["wall_s"] or c["key"] == "productive"
    }
    assert listed == big and {"productive", "data_wait"} <= listed
    assert browser.find_element(By.CSS_SELECTOR, "#tc-mfu dd").text == "unknown peak"
    assert "no GPU" in browser.find_element(By.ID, "tc-mfu-note").text
    e = payload["insights"]["efficiency"]
    assert e["seq_len"] == pytest.approx(8.0) and e["achieved_flops"] > 0
    assert browser.find_element(By.CSS_SELECTOR, "#tc-cost-tokens dd").text.startswith("$")
    assert browser.find_element(By.CSS_SELECTOR, "#tc-cost-badput dd").text.startswith("$")
    screenshot(browser, "card-insights-goodput")


def test_a_loop_without_its_model_flops_is_told_how_to_get_mfu(
    browser: Any, tmp_path: Path, run: RunData
) -> None:
    import dataclasses

    from selenium.webdriver.common.by import By

    states = [
        {**s, "progress": {k: v for k, v in s.get("progress", {}).items() if k != "flops_per_token"}}
        for s in run.states
    ]
    without = dataclasses.replace(run, states=states)  # as if no model had been handed over
    payload = build_payload(without, final=True)
    assert payload["insights"]["efficiency"] is None and payload["insights"]["mfu_hint"]
    _open(browser, tmp_path, payload)
    hint = browser.find_element(By.ID, "tc-mfu-hint")
    assert hint.is_displayed() and "instrument(optimizer, model=model)" in hint.text
    assert not browser.find_elements(By.ID, "tc-mfu")  # no MFU figure to show
    assert browser.find_element(By.CSS_SELECTOR, "#tc-cost-tokens dd").text.startswith("$")
    _open(browser, tmp_path, build_payload(run, final=True))
    assert not browser.find_elements(By.ID, "tc-mfu-hint")  # the model's FLOPs were reported


def test_a_live_update_replaces_the_panel(browser: Any, tmp_path: Path, run: RunData) -> None:
    from selenium.webdriver.common.by import By

    first = build_payload(run, live=True)
    first["insights"] = {
        "attention": [],
        "attention_total": 0,
        "goodput": None,
        "efficiency": None,
        "mfu_hint": None,
        "cost": None,
    }
    _open(browser, tmp_path, first, live=True)
    assert not browser.find_element(By.ID, "tc-insights").is_displayed()
    update = build_payload(run, live=True)
    browser.execute_script("window.TC.update(arguments[0]);", update)
    assert browser.find_element(By.ID, "tc-insights").is_displayed()
    shown = browser.find_elements(By.CSS_SELECTOR, "#tc-attention-list li")
    assert len(shown) == len(update["insights"]["attention"]) > 0
