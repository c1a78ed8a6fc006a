"""The gang panel's "where each rank is" in real headless Chromium: ranks grouped by stack, the
culprit first and marked, stacks to unfold, the flight recorder's line, hostile frames as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traincard_otel._analysis.gang.first_failure import first_failure
from traincard_otel._analysis.gang.stacks import locate
from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.payload.gang import gang_section

from tests.support import payloads as P
from tests.support.browser_helpers import open_html

pytestmark = pytest.mark.browser
TORCH = "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py"
HOSTILE = "<img src=x onerror=window.__pwned=1>"


def _dump(rank: int, frames: list[tuple[str, int, str]], seq: int) -> dict[str, Any]:
    fs = [{"file": f, "line": line, "func": fn} for f, line, fn in frames]
    thread = {"name": "MainThread", "main": True, "daemon": False, "depth": len(fs) + 40, "frames": fs}
    wait = [{"file": "/usr/lib/python3.12/threading.py", "line": 355, "func": "wait"}]
    own = [
        {"name": f"traincard-{n}", "main": False, "daemon": True, "depth": 3, "frames": wait}
        for n in ("console-1-2", "siblings", "watchdog", "store", "schedule")
    ]
    last = {"seq": seq, "op": "all_reduce", "backend": "gloo", "state": "scheduled", "sizes": []}
    return {
        "reason": "stall",
        "time": 1.7e9,
        "rank": rank,
        "threads": [own[0], thread, *own[1:]],
        "collectives": {"last": last},
    }


def _gang() -> dict[str, Any]:
    dumps = {
        r: _dump(r, [(TORCH, 2800, "all_reduce"), ("/job/train.py", 88, "train_step")], 31) for r in (0, 2, 3)
    }
    dumps[1] = _dump(1, [(f"/job/{HOSTILE}.py", 41, HOSTILE), ("/job/train.py", 80, "train_step")], 30)
    located = locate(dumps)
    assert located is not None
    rows = [
        {
            "rank": r,
            "node": 0,
            "host": "h",
            "pid": 100 + r,
            "step": 30,
            "heartbeat_at": 1.7e9,
            "status": "running",
            "updated_at": 1.7e9 + 50,
        }
        for r in range(4)
    ]
    first = first_failure(rows, [], {}, [{"rank": r} for r in range(4)], 0, located=located)
    places = located.pop("places")
    return gang_section(
        {
            "world_size": 4,
            "num_nodes": 1,
            "nodes": [],
            "stragglers": {},
            "first_failure": first,
            "hung": [],
            "waiting": [],
            "waits": [],
            "aggregates": {},
            "failure": None,
            "stacks": located,
            "ranks": [{**r, "where": places[r["rank"]]} for r in rows],
        }
    )  # type: ignore[return-value]


def test_where_each_rank_is_grouped_with_the_culprit_first(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    payload = {**P.running_payload(), "gang": _gang()}
    open_html(browser, assemble_html(payload, live=False), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""
    groups = browser.find_elements(By.CSS_SELECTOR, "#tc-gang-stacks > details")
    assert [g.get_attribute("data-ranks") for g in groups] == ["1", "0,2,3"]
    assert [g.get_attribute("data-culprit") for g in groups] == ["1", "0"]
    culprit = groups[0].find_element(By.TAG_NAME, "summary")
    assert culprit.text.startswith(f"rank 1: in {HOSTILE} at {HOSTILE}.py:41 (the others wait for it)")
    assert (
        groups[1]
        .find_element(By.TAG_NAME, "summary")
        .text.startswith("ranks 0, 2, 3: waiting in all_reduce at train.py:88")
    )
    culprit.click()
    stacks = groups[0].find_elements(By.CSS_SELECTOR, ":scope > pre.tc-stack")  # the user's threads
    assert len(stacks) == 1 and stacks[0].text.startswith("thread MainThread (main)")
    stack = stacks[0].text
    assert f"/job/{HOSTILE}.py:41 in {HOSTILE}" in stack and "40 outer frames" in stack
    own = groups[0].find_element(By.CSS_SELECTOR, "details.tc-gang-own-threads")  # traincard's: one line
    summary = own.find_element(By.TAG_NAME, "summary")
    assert summary.text == "+ 5 traincard threads: console-1-2, siblings, watchdog, store, schedule"
    assert not own.find_element(By.CSS_SELECTOR, "pre.tc-stack").is_displayed()  # folded
    summary.click()
    shown = own.find_elements(By.CSS_SELECTOR, "pre.tc-stack")
    assert len(shown) == 5 and shown[0].is_displayed()
    assert shown[0].text.startswith("thread traincard-console")
    assert browser.execute_script("return window.__pwned === undefined")  # drawn as text, never as HTML
    recorder = browser.find_element(By.ID, "tc-gang-flight-recorder")
    assert recorder.get_attribute("data-not-joined") == "1" and "all_reduce #31" in recorder.text
    first = browser.find_element(By.ID, "tc-gang-first").text
    assert first.startswith("Rank 1 on node 0") and "not in a collective" in first
    wheres = browser.find_elements(By.CSS_SELECTOR, "#tc-gang-ranks tbody tr td:last-child")
    assert wheres[0].text == "waiting in all_reduce at train.py:88" and HOSTILE in wheres[1].text
