"""The Step anatomy and Profiles sections in real headless Chromium, from a real loop's store.

A raw loop with a planted slow forward is instrumented with its model and profiled in process for
a few steps; the card built from its store must draw the anatomy bar with forward as the largest
part and its stacked chart, and list the capture with its top operators, its breakdown and where
its trace is. A gang's card shows its slowest rank beside its median rank, the straggler named.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._data.anatomy import StepParts
from traincard_otel._data.rundata import RunData
from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.payload import build_payload
from traincard_otel._write import pipeline as _pipeline
from traincard_otel._write.telemetry.profiler import Ask

from tests.support.browser_helpers import open_html, screenshot
from tests.support.loops import mlp, train

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    store = tmp_path_factory.mktemp("anatomy") / "store"
    model = mlp(hidden=64)
    model[0].register_forward_hook(lambda module, args, output: time.sleep(0.03))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(
        opt, model=model, store=str(store), system=False, capture_console=False
    )
    pipeline = _pipeline.active()
    assert pipeline is not None and pipeline.profiling is not None
    train(tracker, model, opt, 9, batch=16)
    pipeline.profiling.capture.ask(Ask(id="card-capture", steps=3))  # after step 9
    train(tracker, model, opt, 21, batch=16)
    pipeline.profiling.capture.close(30)
    traincard_otel.shutdown()
    return traincard_otel.load(store)


def _open(browser: Any, tmp_path: Path, payload: dict[str, Any]) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    open_html(browser, assemble_html(payload, live=False), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""


def test_the_anatomy_bar_and_chart_show_the_slow_forward(browser: Any, tmp_path: Path, run: RunData) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, build_payload(run, final=True))
    section = browser.find_element(By.ID, "tc-anatomy")
    assert section.is_displayed() and "STEP ANATOMY" in section.text.upper()
    widths = browser.execute_script(
        "var out = {}; document.querySelectorAll('#tc-anatomy .tc-anatomy-bar .tc-part')"
        ".forEach(function (s) { out[s.getAttribute('data-part')] = s.getBoundingClientRect().width; });"
        " return out;"
    )
    assert max(widths, key=widths.get) == "forward" and set(widths) >= {"forward", "backward", "optimizer"}
    legend = browser.find_element(By.CSS_SELECTOR, "#tc-anatomy .tc-anatomy-legend").text
    assert "forward" in legend and " ms" in legend
    step = browser.find_element(By.CSS_SELECTOR, "#tc-anatomy .tc-anatomy-step").text
    assert step.startswith("step ") and " ms median of 30 recent steps" in step
    chart = browser.find_element(By.CSS_SELECTOR, "#tc-anatomy .tc-anatomy-chart")
    assert int(chart.get_attribute("data-points")) == 30 and int(chart.get_attribute("data-series")) == 6
    assert chart.find_element(By.TAG_NAME, "canvas").size["width"] > 200
    screenshot(browser, "card-step-anatomy")


def test_the_profiles_section_lists_the_capture_with_its_top_operators(
    browser: Any, tmp_path: Path, run: RunData
) -> None:
    from selenium.webdriver.common.by import By

    payload = build_payload(run, final=True)
    _open(browser, tmp_path, payload)
    section = browser.find_element(By.ID, "tc-profiles")
    assert section.is_displayed() and browser.find_element(By.ID, "tc-profiles-count").text == "1"
    capture = section.find_element(By.CSS_SELECTOR, ".tc-profile[data-id='card-capture']")
    summary = capture.find_element(By.TAG_NAME, "summary").text
    assert "steps 15\u201317" in summary and "1 rank" in summary and "asked with traincard profile" in summary
    ops = [
        r.get_attribute("data-operator")
        for r in capture.find_elements(By.CSS_SELECTOR, ".tc-profile-ops tbody tr")
    ]
    expected = [o["name"] for o in payload["profiles"]["captures"][0]["ranks"][0]["operators"]]  # type: ignore[index]
    assert ops == expected and any(o.startswith("aten::") for o in ops)
    parts = {
        s.get_attribute("data-part")
        for s in capture.find_elements(By.CSS_SELECTOR, ".tc-profile-bar .tc-part")
    }
    assert parts <= {"computation", "communication", "other"} and "computation" in parts
    text = capture.text
    assert "profiler's cost: " in text and "trace: " in text and "r0.trace.json.gz" in text
    assert "https://ui.perfetto.dev" in text and "--profile card-capture" in text
    screenshot(browser, "card-profiles")


def test_a_gangs_card_shows_its_slowest_beside_its_median_rank(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    data = RunData(source="gang")
    for rank in range(4):
        forward, wait = (0.06, 0.001) if rank == 2 else (0.01, 0.051)
        data.anatomy[rank] = StepParts()
        data.anatomy[rank].add(
            list(range(1, 41)),
            [float(s) for s in range(40)],
            [0.1] * 40,
            [0.005, forward, 0.02, 0.005, wait] * 40,
            0,
        )
    data.states = [{"rank": r, "attempt": 0, "status": "running", "step": 40} for r in range(4)]
    _open(browser, tmp_path, build_payload(data, final=True))
    ranks = browser.find_elements(By.CSS_SELECTOR, "#tc-anatomy .tc-anatomy-rank")
    assert [(r.get_attribute("data-rank"), r.get_attribute("data-role")) for r in ranks] == [
        ("2", "slowest"),
        ("1", "median"),
    ]
    straggler = browser.find_element(By.ID, "tc-anatomy-straggler").text
    assert straggler.startswith("rank 2 is the straggler: forward 60 ms vs 10 ms on the median rank")
    assert "the other ranks wait in communication" in straggler
    assert browser.find_element(By.ID, "tc-anatomy-count").text.lower() == "slowest and median of 4 ranks"
    headline = browser.find_element(By.ID, "tc-gang-headline").text
    assert "Rank 2 is the straggler: forward" in headline
    slow_row = browser.find_element(By.CSS_SELECTOR, "#tc-gang-ranks tr[data-rank='2']")
    assert "tc-gang-slow" in (slow_row.get_attribute("class") or "")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tc-anatomy .tc-anatomy-chart")) == 2
