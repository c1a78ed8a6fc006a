"""The card front end in real headless Chromium, driven by hand-built payloads (tests/support/payloads.py).

Covers every section of docs/card-payload.md, the log controls, escaping of hostile strings, the live
merge through ``metaflow_card_update``, themes and a 100k-point run. Full-page screenshots go to
test-artifacts/screenshots/card-*.png for review.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from traincard_otel._read.card.page import assemble_html

from tests.support import payloads as P
from tests.support.browser_helpers import SCREENSHOTS, open_html

pytestmark = pytest.mark.browser


def _open(browser: Any, tmp_path: Path, payload: dict[str, Any], *, live: bool = False) -> float:
    """Load the card and wait until it has drawn; returns the seconds that took."""
    from selenium.webdriver.support.ui import WebDriverWait

    t0 = time.perf_counter()
    open_html(browser, assemble_html(payload, live=live), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    elapsed = time.perf_counter() - t0
    assert browser.execute_script("return document.body.dataset.error || ''") == ""
    return elapsed


def _page_screenshot(browser: Any, name: str) -> Path:
    """The whole page (not just the viewport) as test-artifacts/screenshots/<name>.png."""
    width, height = browser.execute_script(
        "return [window.innerWidth, document.documentElement.scrollHeight]"
    )
    shot = browser.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        },
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def _text(browser: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, css).text


def _visible_logs(browser: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return [n for n in browser.find_elements(By.CSS_SELECTOR, "#tc-logs .tc-log") if n.is_displayed()]


def _set_search(browser: Any, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "tc-log-search")
    browser.execute_script("arguments[0].value = ''; arguments[0].dispatchEvent(new Event('input'))", box)
    if text:
        box.send_keys(text)


@pytest.fixture
def dark(browser: Any) -> Iterator[None]:
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    try:
        yield
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_header_shows_the_run_status(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, P.running_payload(), live=True)
    pill = browser.find_element(By.CSS_SELECTOR, "#tc-status .tc-pill")
    assert pill.get_attribute("data-status") == "running" and pill.text.lower() == "running"
    assert _text(browser, "#tc-status .tc-title") == "FinetuneFlow/1763/train/2"
    assert _text(browser, "#tc-phase") == "train"
    assert _text(browser, "#tc-step") == "600 / 2000"
    assert browser.find_element(By.ID, "tc-step").get_attribute("data-step") == "600"
    fill = browser.find_element(By.CSS_SELECTOR, "#tc-progress .tc-progress-fill")
    assert fill.value_of_css_property("width") != "0px"
    assert browser.execute_script(
        "return document.querySelector('#tc-progress .tc-progress-fill').style.width"
    ) == ("30%")
    facts = {
        "tc-epoch": "0.6 / 2",
        "tc-eta": "23m 20s",
        "tc-batch": "32",
        "tc-world": "2",
        "tc-restarts": "1",
        "tc-attempt": "1",
    }
    for fact_id, value in facts.items():
        assert _text(browser, f"#{fact_id} dd") == value, fact_id
    assert _text(browser, "#tc-elapsed dd").startswith("10m")
    assert _text(browser, "#tc-updated dd").endswith("ago")
    assert "$0.42" in _text(browser, "#tc-cost dd") and "$1.39" in _text(browser, "#tc-cost dd")
    # Most severe first, whatever order the payload used.
    kinds = [
        b.get_attribute("data-kind") for b in browser.find_elements(By.CSS_SELECTOR, "#tc-banners .tc-banner")
    ]
    assert kinds == ["stalled", "dropped", "resumed"]
    assert "Stalled for 3 min" in _text(browser, "#tc-banners")
    assert not browser.find_element(By.ID, "tc-failure").is_displayed()
    assert "12 dropped (buffer_full 12)" in _text(browser, "#tc-stats")
    assert "1 corrupt segments" in _text(browser, "#tc-stats")


def test_charts_series_legends_and_markers(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    payload = P.running_payload()
    _open(browser, tmp_path, payload)
    for chart in payload["charts"]:
        section = "#tc-charts" if chart["group"] == "training" else "#tc-system"
        node = browser.find_element(By.CSS_SELECTOR, f'{section} .tc-chart[data-chart-id="{chart["id"]}"]')
        assert node.find_elements(By.TAG_NAME, "canvas"), chart["id"]
        assert int(node.get_attribute("data-points")) == sum(len(s["x"]) for s in chart["series"])
        legend = node.find_element(By.CLASS_NAME, "u-legend").text
        for series in chart["series"]:
            assert series["label"] in legend, (chart["id"], series["label"])
        # Step charts draw both discontinuity markers; time charts draw none.
        expected = "2" if chart["x"] == "step" else None
        assert node.get_attribute("data-markers") == expected, chart["id"]
    assert _text(browser, '.tc-chart[data-chart-id="loss"] .tc-chart-title') == "loss"
    # train and eval keep their colours across charts.
    colours = browser.execute_script(
        "var c = TC.charts(); return [c.get('loss').plot.series[1].stroke(),"
        " c.get('loss').plot.series[2].stroke(), c.get('learning_rate').plot.series[1].stroke()]"
    )
    assert colours[0] == colours[2] != colours[1]
    # The legend shows the latest value when the cursor is elsewhere.
    last_loss = payload["charts"][0]["series"][0]["y"][-1]
    assert f"{last_loss:g}"[:5] in _text(browser, '.tc-chart[data-chart-id="loss"] .u-legend')
    # eval has its own x: the chart draws the union of x with gaps as null.
    loss = browser.execute_script("var d = TC.charts().get('loss').plot.data; return [d[0].length, d[2]]")
    assert loss[0] == 600
    assert sum(v is not None for v in loss[1]) == 6
    # System section: notes, tiles, time charts.
    system = _text(browser, "#tc-system")
    assert "NVML does not report power" in system
    tiles = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#tc-system .tc-tile")]
    assert tiles == [
        "CPU\n62 %",
        "Memory used\n41.0 GiB",
        "gpu0 utilization\n93 %",
        "gpu0 temperature\n71 °C",
    ]


def test_series_with_different_x_are_merged_on_one_axis(browser: Any, tmp_path: Path) -> None:
    payload = P.empty_payload()
    payload["charts"] = [
        {
            "id": "acc",
            "title": "accuracy",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [
                {"label": "train", "x": [1, 3, 5], "y": [0.1, 0.3, None]},
                {"label": "eval", "x": [4, 2, 3], "y": [0.4, 0.2, float("nan")]},  # unsorted, NaN
            ],
        }
    ]
    _open(browser, tmp_path, payload)
    data = browser.execute_script("return TC.charts().get('acc').plot.data")
    assert data == [[1, 2, 3, 4, 5], [0.1, None, 0.3, None, None], [None, 0.2, None, 0.4, None]]


def _chart(id_: str, unit: str, x: str, series: dict[str, tuple[list[float], list[float]]]) -> dict[str, Any]:
    """A system-group chart of the payload: ``series`` maps labels to (x, y)."""
    return {
        "id": id_,
        "title": id_,
        "group": "system",
        "unit": unit,
        "x": x,
        "series": [{"label": label, "x": xs, "y": ys} for label, (xs, ys) in series.items()],
    }


def test_a_chart_with_one_point_shows_the_minute_around_it(browser: Any, tmp_path: Path) -> None:
    """A rate needs two samples: a short run's disk chart has one point per series, at one time."""
    t, payload = 1_795_816_591.9, P.empty_payload()
    payload["charts"] = [
        _chart(id_, "MB/s", x, {"read": ([at], [0.3]), "write": ([at], [0.0])})
        for id_, x, at in (("disk", "time", t), ("loss", "step", 7))
    ]
    _open(browser, tmp_path, payload)
    scales = browser.execute_script(
        "var c = TC.charts(); return ['disk', 'loss'].map(function (id) {"
        " var p = c.get(id).plot; return [p.scales.x.min, p.scales.x.max]; })"
    )
    assert scales == [[t - 30, t + 30], [6, 8]]
    ticks = browser.execute_script("return TC.charts().get('disk').plot.axes[0]._values")  # (drawn)
    assert ticks and all(len(tick) == 8 and tick.count(":") == 2 for tick in ticks)  # hh:mm:ss, not dates


def test_time_ticks_leave_room_for_their_labels(browser: Any, tmp_path: Path) -> None:
    """A short run's system charts label seconds: ticks far enough apart that labels never touch."""
    t0, payload = 1_795_816_500.0, P.empty_payload()
    payload["charts"] = [
        _chart(id_, unit, "time", {"system": ([t0 + 2 * i for i in range(50)], [y] * 50)})
        for id_, unit, y in (("cpu", "%", 100.0), ("memory", "GiB", 20.0))  # y labels of two widths
    ]
    _open(browser, tmp_path, payload)
    gaps = browser.execute_script(
        "var c = TC.charts(); return ['cpu', 'memory'].map(function (id) {"
        " var p = c.get(id).plot, s = p.axes[0]._splits;"
        " return p.valToPos(s[1], 'x') - p.valToPos(s[0], 'x'); })"
    )
    assert all(gap >= 60 for gap in gaps), gaps  # an hh:mm:ss label is about 55 px wide


def test_checkpoints_table_marks_the_best(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, P.running_payload())
    rows = browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints table tbody tr")
    assert [r.get_attribute("data-step") for r in rows] == ["600", "400", "200"]  # newest first
    best = browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints table tr.best")
    assert len(best) == 1
    assert "★" in best[0].text and "eval_loss" in best[0].text and "1.41" in best[0].text
    assert "1.20 GiB" in rows[0].text
    summary = _text(browser, "#tc-checkpoints .tc-best-summary")
    assert "step 400" in summary and "eval_loss = 1.41" in summary
    path = rows[0].find_element(By.CSS_SELECTOR, "code.tc-path")
    assert path.text == "s3://bucket/runs/FinetuneFlow/1763/checkpoint-600"
    assert path.value_of_css_property("user-select") == "all"
    selected = browser.execute_script(
        "var s = window.getSelection(); s.selectAllChildren(arguments[0]); return s.toString()", path
    )
    assert selected == "s3://bucket/runs/FinetuneFlow/1763/checkpoint-600"


def test_log_search_level_filter_and_tracebacks(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    payload = P.running_payload()
    _open(browser, tmp_path, payload)
    rows = browser.find_elements(By.CSS_SELECTOR, "#tc-logs .tc-log")
    assert len(rows) == len(payload["logs"])
    assert "saved checkpoint-600" in rows[-1].text  # newest at the bottom, scrolled into view
    assert browser.execute_script(
        "var l = document.querySelector('#tc-logs .tc-log-list');"
        " return l.scrollTop + l.clientHeight >= l.scrollHeight - 2"
    )
    error = next(r for r in rows if r.get_attribute("data-level") == "ERROR")
    info = rows[0]
    assert "tc-log--error" in error.get_attribute("class")
    assert error.value_of_css_property("background-color") != info.value_of_css_property("background-color")
    assert "r1" in error.find_element(By.CLASS_NAME, "tc-log-rank").text

    _set_search(browser, "nccl")  # case-insensitive
    assert [n.get_attribute("data-level") for n in _visible_logs(browser)] == ["ERROR"]
    _set_search(browser, "RANK 1 LOST")
    assert len(_visible_logs(browser)) == 1 and "heartbeat" in _visible_logs(browser)[0].text
    _set_search(browser, "no such line anywhere")
    assert _visible_logs(browser) == []
    assert browser.find_element(By.CSS_SELECTOR, "#tc-logs .tc-note:not([hidden])").text.startswith(
        "No log lines"
    )
    _set_search(browser, "")
    assert len(_visible_logs(browser)) == len(rows)

    level = Select(browser.find_element(By.ID, "tc-log-level"))
    assert [o.text for o in level.options] == ["All levels", "WARNING+", "ERROR+"]
    level.select_by_visible_text("WARNING+")
    assert [n.get_attribute("data-level") for n in _visible_logs(browser)] == [
        "WARNING",
        "ERROR",
        "CRITICAL",
        "WARNING",
    ]
    level.select_by_visible_text("ERROR+")
    assert [n.get_attribute("data-level") for n in _visible_logs(browser)] == ["ERROR", "CRITICAL"]
    assert _text(browser, "#tc-log-count") == f"2 of {len(rows)} lines"
    level.select_by_visible_text("WARNING+")
    _set_search(browser, "SCRIPT")  # search and level combine
    assert [n.get_attribute("data-level") for n in _visible_logs(browser)] == ["WARNING"]
    level.select_by_visible_text("All levels")
    _set_search(browser, "")

    details = error.find_element(By.CSS_SELECTOR, "details.tc-tb")
    pre = details.find_element(By.TAG_NAME, "pre")
    assert details.get_attribute("open") is None and not pre.is_displayed()
    details.find_element(By.TAG_NAME, "summary").click()
    assert details.get_attribute("open") is not None and pre.is_displayed()
    assert "NCCL communicator was aborted on rank 1" in pre.text
    details.find_element(By.TAG_NAME, "summary").click()
    assert details.get_attribute("open") is None


def test_failure_summary(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, P.failed_payload())
    box = browser.find_element(By.ID, "tc-failure")
    assert box.is_displayed()
    assert _text(browser, "#tc-failure-type") == "torch.OutOfMemoryError"
    assert _text(browser, "#tc-failure-message").startswith("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert "torch.OutOfMemoryError: CUDA out of memory" in box.text
    verdict = browser.find_element(By.CSS_SELECTOR, "#tc-failure .tc-verdict")
    assert verdict.get_attribute("data-verdict") == "cuda_oom"
    assert "GPU out of memory" in verdict.text and "The GPU ran out of memory" in verdict.text
    evidence = [li.text for li in verdict.find_elements(By.CSS_SELECTOR, ".tc-evidence li")]
    assert evidence == P.failed_payload()["failure"]["verdict"]["evidence"]
    assert "torch.autograd.backward(" in _text(browser, "#tc-failure-stack")
    metrics = _text(browser, "#tc-failure-metrics")
    assert "loss" in metrics and "1.287" in metrics and "grad_norm" in metrics
    system = _text(browser, "#tc-failure-system")
    assert "hw.gpu.memory.usage[gpu0]" in system and "78.0 GiB" in system and "97 %" in system
    # Units come from what the run recorded for each metric (payload.system.units).
    assert "612.5 W" in system and "41 %" in system
    rows = browser.find_elements(By.CSS_SELECTOR, "#tc-failure-system tr")
    readings = {r.find_element(By.TAG_NAME, "th").text: r.find_element(By.TAG_NAME, "td").text for r in rows}
    assert readings["hw.errors[gpu0]{error.type=uncorrected}"] == "0"  # {error}: a count, no unit
    assert readings["hw.power[gpu0]"] == "612.5 W"
    assert (
        browser.find_element(By.CSS_SELECTOR, "#tc-status .tc-pill").get_attribute("data-status") == "failed"
    )
    assert (
        browser.find_element(By.CSS_SELECTOR, "#tc-banners .tc-banner").get_attribute("data-kind") == "failed"
    )
    _page_screenshot(browser, "card-failed")


@pytest.mark.parametrize("live", [False, True])
def test_hostile_strings_stay_text(browser: Any, tmp_path: Path, live: bool) -> None:
    from selenium.webdriver.common.by import By

    payload = P.xss_payload()
    _open(browser, tmp_path, payload, live=live)
    if live:  # and once more through the live path
        browser.execute_script("window.metaflow_card_update(arguments[0])", payload)
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-updates") == "1"
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return window.__xss") is None
    # Only the page's own scripts: payload, uPlot, card (+ token and update function when live).
    assert browser.execute_script("return document.scripts.length") == (5 if live else 3)
    assert P.XSS_CLOSE in browser.title
    assert _text(browser, "#tc-status .tc-title") == P.XSS_CLOSE + P.XSS_IMG
    assert _text(browser, "#tc-phase") == P.XSS_IMG
    assert _text(browser, "#tc-failure-type") == P.XSS_SCRIPT
    assert _text(browser, "#tc-failure-message") == P.XSS_CLOSE + P.XSS_IMG
    logs = _text(browser, "#tc-logs")
    assert P.XSS_SCRIPT in logs and P.XSS_IMG in logs
    assert P.XSS_IMG in _text(browser, "#tc-checkpoints")
    assert browser.execute_script(
        "var id = arguments[0];"
        " return Array.from(document.querySelectorAll('.tc-chart'))"
        ".some(function (e) { return e.dataset.chartId === id; })",
        P.XSS_IMG,
    )
    assert P.XSS_SCRIPT in _text(browser, ".tc-chart[data-chart-id='loss'] .u-legend")
    assert P.XSS_SCRIPT in _text(browser, "#tc-system")
    if not live:
        _page_screenshot(browser, "card-xss")


def test_live_updates_merge_without_reload(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    html = assemble_html(P.running_payload(600), live=True)
    assert 'var METAFLOW_RELOAD_TOKEN = "[METAFLOW_RELOAD_TOKEN]";' in html
    _open(browser, tmp_path, P.running_payload(600), live=True)
    assert browser.execute_script("return METAFLOW_RELOAD_TOKEN") == "[METAFLOW_RELOAD_TOKEN]"
    assert browser.execute_script("return typeof window.metaflow_card_update") == "function"
    body = browser.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-updates") == "0"

    def points(chart_id: str) -> int:
        return int(
            browser.find_element(By.CSS_SELECTOR, f'.tc-chart[data-chart-id="{chart_id}"]').get_attribute(
                "data-points"
            )
        )

    assert points("loss") == 606
    cpu_before = points("cpu")
    browser.execute_script("window.__same_page = 1")
    _set_search(browser, "nccl")

    first = P.live_update(600, 650)
    assert browser.execute_script("return window.metaflow_card_update(arguments[0])", first) is True
    assert body.get_attribute("data-updates") == "1"
    assert _text(browser, "#tc-step") == "650 / 2000"
    assert points("loss") == 650 + 6  # train 595..650 sent, only 601..650 appended; eval unchanged

    second = P.live_update(650, 700)
    second["charts"].append(
        {
            "id": "accuracy",
            "title": "accuracy",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [{"label": "eval", "x": [700], "y": [0.71]}],
        }
    )
    second["charts"][0]["series"].append({"label": "eval (resumed 1)", "x": [690, 700], "y": [1.5, 1.45]})
    second["markers"] = [*P.markers(), {"x": 680, "label": "attempt 2 (retry)", "kind": "restart"}]
    second["checkpoints"] = [
        *P.checkpoints(),
        {
            "step": 700,
            "path": "out/checkpoint-700",
            "size_bytes": 10,
            "time": P.T0 + 700,
            "best": False,
            "metric": None,
            "value": None,
        },
    ]
    browser.execute_script("window.metaflow_card_update(arguments[0])", second)
    assert body.get_attribute("data-updates") == "2"
    assert browser.execute_script("return window.__same_page") == 1  # no reload
    assert _text(browser, "#tc-step") == "700 / 2000"
    assert points("loss") == 700 + 7 + 2  # train, eval (one new point) and the new series
    assert browser.execute_script("return TC.charts().get('loss').plot.data[0].length") == 700
    assert "eval (resumed 1)" in _text(browser, '.tc-chart[data-chart-id="loss"] .u-legend')
    assert points("cpu") > cpu_before
    new = browser.find_element(By.CSS_SELECTOR, '#tc-charts .tc-chart[data-chart-id="accuracy"]')
    assert new.find_elements(By.TAG_NAME, "canvas") and new.get_attribute("data-points") == "1"
    assert (
        browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]').get_attribute("data-markers")
        == "3"
    )
    # Header, banners, checkpoints and logs were replaced wholesale; the log filter stayed on.
    kinds = [
        b.get_attribute("data-kind") for b in browser.find_elements(By.CSS_SELECTOR, "#tc-banners .tc-banner")
    ]
    assert kinds == ["resumed"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints tbody tr")) == 4
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tc-logs .tc-log")) == 10
    assert [n.get_attribute("data-level") for n in _visible_logs(browser)] == ["ERROR"]
    _set_search(browser, "")
    assert "2 live updates" in _text(browser, "#tc-stats")
    _page_screenshot(browser, "card-running")


def test_final_page_has_no_update_function(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    html = assemble_html(P.final_payload(), live=False)
    assert "metaflow_card_update" not in html and "METAFLOW_RELOAD_TOKEN" not in html
    _open(browser, tmp_path, P.final_payload())
    assert browser.execute_script("return typeof window.metaflow_card_update") == "undefined"
    assert browser.execute_script("return typeof window.METAFLOW_RELOAD_TOKEN") == "undefined"
    assert (
        browser.find_element(By.CSS_SELECTOR, "#tc-status .tc-pill").get_attribute("data-status")
        == "finished"
    )
    assert _text(browser, "#tc-mode").lower() == "final"
    assert _text(browser, "#tc-eta dd") == "\u2013"  # en dash: no ETA once finished
    _page_screenshot(browser, "card-final")


def test_dark_theme(browser: Any, tmp_path: Path, dark: None) -> None:
    _open(browser, tmp_path, P.running_payload(), live=True)
    assert browser.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches")
    rgb = browser.execute_script(
        "var m = getComputedStyle(document.body).backgroundColor.match(/\\d+/g);"
        " return m.slice(0, 3).map(Number)"
    )
    assert sum(rgb) / 3 < 40, rgb
    fg = browser.execute_script(
        "var m = getComputedStyle(document.querySelector('#tc-step')).color.match(/\\d+/g);"
        " return m.slice(0, 3).map(Number)"
    )
    assert sum(fg) / 3 > 180, fg
    _page_screenshot(browser, "card-dark")


def test_empty_sections_show_a_note(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, P.empty_payload(), live=True)
    assert _text(browser, "#tc-step") == "0"
    assert not browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints table")
    assert "No checkpoints saved yet." in _text(browser, "#tc-checkpoints")
    assert "No training metrics reported yet." in _text(browser, "#tc-charts")
    assert "No system metrics recorded." in _text(browser, "#tc-system")
    assert "No log lines yet." in _text(browser, "#tc-logs")
    assert not browser.find_element(By.ID, "tc-log-search").is_displayed()
    assert not browser.find_element(By.ID, "tc-banners").is_displayed()
    assert not browser.find_element(By.ID, "tc-failure").is_displayed()
    assert not browser.find_elements(By.TAG_NAME, "canvas")
    # The first live payload with data fills the sections in.
    browser.execute_script("window.metaflow_card_update(arguments[0])", P.live_update(0, 40))
    assert browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints table")
    assert browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"] canvas')
    assert browser.find_element(By.ID, "tc-log-search").is_displayed()


def test_a_100k_point_run_renders_quickly(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    payload = P.big_payload(100_000)
    seconds = _open(browser, tmp_path, payload)
    assert seconds < 15, f"{seconds:.1f} s to draw 100k points per series"
    loss = browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    assert int(loss.get_attribute("data-points")) == 100_000 + 100
    assert loss.find_elements(By.TAG_NAME, "canvas") and loss.get_attribute("data-markers") == "1"
    # A live update appends to the big series without a noticeable pause.
    steps = list(range(100_001, 101_001))
    update = {
        "run": P.run(101_000, max_steps=200_000),
        "charts": [{"id": "loss", "series": [{"label": "train", "x": steps, "y": [1.0] * len(steps)}]}],
    }
    ms = browser.execute_script(
        "var t = performance.now(); window.TC.update(arguments[0]); return performance.now() - t", update
    )
    assert ms < 2000, f"{ms:.0f} ms for one live update"
    assert int(loss.get_attribute("data-points")) == 101_000 + 100
    print(f"100k-point card: drawn in {seconds:.2f} s, live update {ms:.0f} ms")


def test_live_update_keeps_a_zoomed_view(browser: Any, tmp_path: Path) -> None:
    _open(browser, tmp_path, P.running_payload(600), live=True)
    browser.execute_script("TC.charts().get('loss').plot.setScale('x', {min: 100, max: 200})")
    browser.execute_script("window.metaflow_card_update(arguments[0])", P.live_update(600, 650))
    zoomed, follows = browser.execute_script(
        "var c = TC.charts(); return [[c.get('loss').plot.scales.x.min, c.get('loss').plot.scales.x.max],"
        " c.get('grad_norm').plot.scales.x.max]"
    )
    assert zoomed == [100, 200]  # the user's zoom survives the update
    assert follows == 650  # charts that were not zoomed follow the new points


def test_odd_payload_pieces_do_not_break_the_page(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    payload = P.running_payload(50)
    payload["markers"] += [None, {"label": "no x"}, {"x": "12", "label": "string x"}]
    payload["charts"] += [
        {"id": "no_series", "title": "empty", "group": "training", "x": "step"},
        {
            "id": "ragged",
            "group": "training",
            "series": [{"label": "a", "x": [1, 2, None, 4], "y": [1, None]}],
        },
    ]
    payload["banners"] += [None, "text only", {"text": "no kind"}]
    payload["logs"] += [{"message": "no time, level or rank"}, None]
    payload["checkpoints"] += [{"step": 60}]
    payload["failure"] = {"type": "ValueError", "verdict": None, "last_metrics": None}
    payload["unknown_key"] = {"ignored": True}
    _open(browser, tmp_path, payload)  # asserts no render error
    assert browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="no_series"] canvas')
    assert (
        browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="ragged"]').get_attribute(
            "data-points"
        )
        == "2"
    )
    assert "no time, level or rank" in _text(browser, "#tc-logs")
    assert "ValueError" in _text(browser, "#tc-failure")
    browser.execute_script(
        "window.metaflow_card_update && window.metaflow_card_update(arguments[0])", payload
    )
    browser.execute_script(
        "window.TC.update({charts: [{id: 'loss', series: [{label: 'train'}]}], logs: null})"
    )
    assert browser.execute_script("return document.body.dataset.error || ''") == ""
