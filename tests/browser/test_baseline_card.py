"""The baseline overlay and status line in real headless Chromium, from two real pipelines' stores.

A run with a 15 % higher loss and 25 % slower steps than its baseline: the loss chart draws the
baseline's train and eval curves dashed and lighter, named with its run id in the legend; the
status bar says the run is behind, by how much. A live update without a baseline keeps it; a run
without one shows the note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traincard_otel._analysis.baseline import Baseline
from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.load.reader import RunData
from traincard_otel._read.payload import build_payload
from traincard_otel.testing import capture

from tests.support.browser_helpers import open_html, screenshot

pytestmark = pytest.mark.browser


def _run(steps: int, scale: float, step_s: float) -> RunData:
    with capture() as cap:
        r = cap.reporter
        r.progress(max_steps=600)
        with r.phase("train"):
            for s in range(1, steps + 1):
                r.metrics({"loss": scale * (2.0 / s**0.5 + 0.3)}, step=s)
                r.step_end(s, duration_s=step_s, samples=8)
                if s % 100 == 0:
                    r.metrics({"eval_loss": scale * (2.2 / s**0.5 + 0.35)}, step=s)
        return cap.load()


def _open(browser: Any, tmp_path: Path, payload: dict[str, Any], live: bool = False) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    open_html(browser, assemble_html(payload, live=live), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""


_LOSS_SERIES = (
    "var ch = window.TC.charts().get('loss');"
    "return ch.plot.series.slice(1).map(function (s) {"
    "  return {label: s.label, dash: s.dash || null, stroke: String(s.stroke(ch.plot, 1)), show: s.show}; });"
)


def test_the_overlay_and_the_status_text_are_visible(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    base = _run(600, scale=1.0, step_s=0.02)
    run = _run(250, scale=1.15, step_s=0.025)
    baseline = Baseline(label="TrainFlow/1763/train/2", data=base, run_id="1763")
    payload = build_payload(run, live=True, baseline=baseline)
    _open(browser, tmp_path, payload, live=True)

    bar = browser.find_element(By.ID, "tc-baseline")
    assert bar.is_displayed()
    assert browser.find_element(By.ID, "tc-baseline-run").text == "TrainFlow/1763/train/2"
    figures = bar.find_elements(By.CSS_SELECTOR, ".tc-baseline-fig")
    shown = [(f.get_attribute("data-kind"), f.get_attribute("data-verdict"), f.text) for f in figures]
    assert [(k, v) for k, v, _t in shown] == [("metric", "behind"), ("step_time", "behind")]
    assert shown[0][2].startswith("loss behind baseline at step 250: ") and shown[0][2].endswith(
        "(15 % higher)"
    )
    assert shown[1][2] == "time per step behind baseline at step 250: 25 ms vs 20 ms (25 % slower)"
    assert all(f.is_displayed() for f in figures)
    # in the status bar itself, under the run's facts
    assert (
        browser.execute_script("return document.getElementById('tc-baseline').parentNode.id") == "tc-status"
    )

    series = browser.execute_script(_LOSS_SERIES)
    by_label = {s["label"]: s for s in series}
    assert {"train", "eval", "train \u00b7 baseline 1763", "eval \u00b7 baseline 1763"} <= set(by_label), (
        series
    )
    own, theirs = by_label["train"], by_label["train \u00b7 baseline 1763"]
    assert own["dash"] is None and theirs["dash"] and theirs["show"]
    assert theirs["stroke"].startswith("rgba(") and theirs["stroke"].endswith(",0.6)")  # lighter
    legend = browser.find_element(By.CSS_SELECTOR, "[data-chart-id='loss'] .u-legend").text
    assert "train \u00b7 baseline 1763" in legend and "eval \u00b7 baseline 1763" in legend
    # without a cursor: this run's latest step, and the baseline's value there (not at its step 600)
    values = browser.execute_script(
        "var out = {}; document.querySelectorAll(\"[data-chart-id='loss'] .u-legend .u-series\")"
        ".forEach(function (r) { var l = r.querySelector('.u-label'), v = r.querySelector('.u-value');"
        " if (l && v) out[l.textContent] = v.textContent; }); return out;"
    )
    assert values["step"] == "250", values
    drawn = next(x for x in payload["baseline"]["series"] if x["label"] == "train \u00b7 baseline 1763")
    at_250 = [y for x, y in zip(drawn["x"], drawn["y"], strict=True) if x <= 250][-1]
    assert values["train \u00b7 baseline 1763"] == repr(float(f"{at_250:.5g}")), values
    box = browser.find_element(By.CSS_SELECTOR, "[data-chart-id='loss']")
    assert box.get_attribute("data-baseline") == "2"
    # the overlay spans the baseline's 600 steps, past this run's 250
    x_max = browser.execute_script("var p = window.TC.charts().get('loss').plot; return p.scales.x.max;")
    assert x_max == 600
    screenshot(browser, "card-baseline")

    # a live update whose task process has not found the baseline yet keeps the one drawn
    update = build_payload(run, live=True)
    assert update["baseline"] is None
    browser.execute_script("window.TC.update(arguments[0]);", update)
    assert browser.find_element(By.ID, "tc-baseline").is_displayed()
    assert {s["label"] for s in browser.execute_script(_LOSS_SERIES)} >= {"train \u00b7 baseline 1763"}

    # a run without a baseline: a quiet note, nothing overlaid
    note = "no earlier successful run of TrainFlow/train"
    payload = build_payload(run, final=True, baseline=Baseline(label="auto", note=note))
    _open(browser, tmp_path, payload)
    assert browser.find_element(By.ID, "tc-baseline-note").text == note
    assert not browser.find_elements(By.CSS_SELECTOR, ".tc-baseline-fig")
    assert all("baseline" not in s["label"] for s in browser.execute_script(_LOSS_SERIES))
    screenshot(browser, "card-baseline-note")
