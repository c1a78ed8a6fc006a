"""The Sweep section in real headless Chromium: a comparison card of four branches (one failed) and a
branch's live card. Constants are folded, varying hyperparameters come first, the best branch is
marked in the table and on the curves, a heading click sorts, and a live update replaces the
section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.card.render import render_comparison
from traincard_otel._read.payload import build_payload
from traincard_otel._read.payload.sweep import sweep_section
from traincard_otel._types import JsonObject
from traincard_otel.testing import capture

from tests.support.browser_helpers import open_html, screenshot

pytestmark = pytest.mark.browser


def _summary(task: str, lr: float, best: float, status: str = "finished") -> JsonObject:
    return {
        "pathspec": f"SweepFlow/9/train/{task}",
        "status": status,
        "step": 100 if status == "finished" else 40,
        "hyperparameters": {"lr": lr, "seed": int(task) % 2, "model": "tiny"},
        "metrics": {
            "loss": {"last": best + 0.05, "best": best, "best_step": 90, "last_step": 100, "points": 100}
        },
        "main": "loss",
        "higher_is_better": False,
        "curve": [[float(s), best + 2.0 / s] for s in range(10, 101, 10)],
        "failure": "RuntimeError: loss diverged" if status == "failed" else None,
    }


SUMMARIES = {
    "1": _summary("1", 0.1, 0.8),
    "2": _summary("2", 0.3, 0.4),
    "3": _summary("3", 1.0, 0.6),
    "4": _summary("4", 3.0, 1.5, "failed"),
}


def _ready(browser: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""


def _column(browser: Any, index: int) -> list[str]:
    return [
        str(t)
        for t in browser.execute_script(
            "return Array.from(document.querySelectorAll('#tc-sweep-table tbody tr'))"
            f".map(function (tr) {{ return tr.children[{index}].textContent; }});"
        )
    ]


def test_the_comparison_card_folds_marks_and_sorts(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    open_html(browser, render_comparison(SUMMARIES, "SweepFlow/9/train"), tmp_path)
    _ready(browser)
    box = browser.find_element(By.ID, "tc-sweep")
    assert box.is_displayed() and "4 branches" in browser.find_element(By.ID, "tc-sweep-count").get_attribute(
        "textContent"
    )
    assert not browser.find_element(By.ID, "tc-charts").is_displayed()  # a comparison card: the sweep alone
    heads = [
        th.get_attribute("textContent")
        for th in box.find_elements(By.CSS_SELECTOR, "#tc-sweep-table thead th")
    ]
    assert heads[:4] == ["branch", "lr", "seed", "status"]  # varying first; model folded
    assert "model = tiny" in browser.find_element(By.ID, "tc-sweep-constant").get_attribute("textContent")
    assert _column(browser, 0)[0] == "2 \u2605 best"
    failed = box.find_element(By.CSS_SELECTOR, "tr[data-status='failed']")
    assert failed.get_attribute("data-branch") == "4"
    assert (
        browser.execute_script(
            "return document.querySelectorAll('#tc-sweep-curves path[data-branch]').length"
        )
        == 4
    )
    assert (
        browser.find_element(By.CSS_SELECTOR, "#tc-sweep-curves path.tc-sweep-best").get_attribute(
            "data-branch"
        )
        == "2"
    )
    assert (
        browser.execute_script("return document.querySelectorAll('#tc-sweep-scatter-0 circle').length") == 4
    )
    screenshot(browser, "sweep-comparison")

    box.find_element(By.CSS_SELECTOR, "th[data-key='hp:lr']").click()
    assert _column(browser, 1) == ["0.1", "0.3", "1", "3"]
    box = browser.find_element(By.ID, "tc-sweep")
    box.find_element(By.CSS_SELECTOR, "th[data-key='hp:lr']").click()
    assert _column(browser, 1) == ["3", "1", "0.3", "0.1"]


def test_a_branch_live_card_shows_and_updates_its_siblings(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with capture() as cap:
        with cap.reporter.phase("train"):
            for s in range(1, 30):
                cap.reporter.metrics({"loss": 1.0 / s}, step=s)
        data = cap.load()
    section = sweep_section(SUMMARIES, title="SweepFlow/9/train", own="SweepFlow/9/train/3", live=True)
    open_html(browser, assemble_html(build_payload(data, live=True, sweep=section), live=True), tmp_path)
    _ready(browser)
    assert browser.find_element(By.ID, "tc-charts").is_displayed()  # the branch's own card stays
    mine = browser.find_element(By.CSS_SELECTOR, "#tc-sweep-table tr.tc-sweep-self")
    assert mine.get_attribute("data-branch") == "3"
    more = dict(SUMMARIES, **{"5": _summary("5", 0.2, 0.1)})
    update = build_payload(
        data,
        live=True,
        sweep=sweep_section(more, title="SweepFlow/9/train", own="SweepFlow/9/train/3", live=True),
    )
    browser.execute_script("window.TC.update(arguments[0]);", update)
    assert "5 branches" in browser.find_element(By.ID, "tc-sweep-count").get_attribute("textContent")
    assert _column(browser, 0)[0] == "5 \u2605 best"
