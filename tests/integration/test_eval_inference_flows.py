"""The evaluation and batch-inference example flows, run for real by Metaflow in a subprocess.

Each flow fits a tiny GPT-2 briefly, then evaluates (or generates with) it in a ``@traincard``
step with some items planted to fail; ``load()`` and the card (in headless Chromium where it
is installed) must show the phase, the per-item figures and the error count.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env

pytest.importorskip("metaflow")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def flow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("flows")
    for name in ("eval_flow.py", "inference_flow.py", "tiny_gpt2.py"):
        shutil.copy(REPO / "examples" / name, d / name)
    return d


def _run(flow_dir: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(flow_dir), TRAINCARD_SYSTEM_INTERVAL="1")
    proc = subprocess.run(
        [sys.executable, script, "--no-pylint", *args],
        cwd=flow_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _pathspec(proc: subprocess.CompletedProcess[str], flow: str, step: str) -> str:
    match = re.search(rf"\[(\d+)/{step}/(\d+) ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-2000:]
    return f"{flow}/{match.group(1)}/{step}/{match.group(2)}"


def _loaded(flow_dir: Path, pathspec: str) -> Any:
    return metaflow_client(
        (
            "task = metaflow.Task(sys.argv[1])\n"
            "run = traincard_otel.load(task)\n"
            "m = {k: {'steps': list(s.steps), 'values': list(s.values)} for k, s in run.metrics.items()}\n"
            "print(json.dumps({'metrics': m, 'phases': [p['n'] for p in run.phases],\n"
            "                  'status': run.status['status'],\n"
            "                  'summary': task['summary'].data, 'no_goodput': run.goodput is None,\n"
            "                  'warnings': [l['message'] for l in run.logs if l['level'] == 'WARNING']}))"
        ),
        pathspec,
        flow_dir,
        subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(flow_dir)),
    )


def _card(flow_dir: Path, script: str, pathspec: str) -> str:
    out = flow_dir / f"{pathspec.split('/')[2]}.html"
    _run(flow_dir, script, "card", "get", pathspec.split("/", 1)[1], str(out))
    return out.read_text()


def _check_in_browser(html: str, tmp_path: Path, charts: set[str], title: str) -> None:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return  # the payload checks above stand; tests/browser covers the page itself
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        page = tmp_path / "card.html"
        page.write_text(html, encoding="utf-8")
        driver.get(page.as_uri())
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.body.dataset.ready === '1'")
        )
        assert driver.execute_script("return document.body.dataset.error || ''") == ""
        drawn = {
            c.get_attribute("data-chart-id") for c in driver.find_elements(By.CSS_SELECTOR, "[data-chart-id]")
        }
        assert charts <= drawn, drawn
        assert driver.find_element(By.ID, "tc-phase").text in ("\u2013", "-", "")  # finished: no open phase
        assert "WARNING" in driver.find_element(By.ID, "tc-logs").text  # the failed items' lines
        # laid out for the kind of loop: items, not steps; no epoch; its own section title
        assert driver.find_element(By.CLASS_NAME, "tc-step-label").text.lower() == "items"
        assert driver.find_elements(By.ID, "tc-epoch") == []
        assert (
            driver.find_element(By.CSS_SELECTOR, "#tc-charts .tc-h2").text.lower().startswith(title.lower())
        )
    finally:
        driver.quit()


@pytest.mark.slow
def test_eval_flow_reports_items_latency_and_errors(flow_dir: Path, tmp_path: Path) -> None:
    proc = _run(
        flow_dir, "eval_flow.py", "run", "--items", "320", "--corrupt_every", "40", "--fit_steps", "100"
    )
    pathspec = _pathspec(proc, "EvalFlow", "evaluate")
    got = _loaded(flow_dir, pathspec)
    m = got["metrics"]
    assert got["status"] == "finished" and "training.eval" in got["phases"] and got["no_goodput"]  # no steps
    assert m["items_per_s"]["steps"] == list(range(32, 321, 32))
    assert m["errors"]["values"][-1] == 8 and got["summary"]["errors"] == 8  # every 40th of 320
    assert all(
        0 < p50 <= p90 <= p99
        for p50, p90, p99 in zip(
            m["latency_p50_s"]["values"],
            m["latency_p90_s"]["values"],
            m["latency_p99_s"]["values"],
            strict=True,
        )
    )
    assert m["accuracy"]["values"][-1] > 0.5  # the briefly fitted model predicts the progression
    assert sum("failed: IndexError" in w for w in got["warnings"]) == 8

    html = _card(flow_dir, "eval_flow.py", pathspec)
    payload = card_payload(html)
    charts = {c["id"] for c in payload["charts"]}
    assert {"items_per_s", "latency_s", "errors", "accuracy", "loss"} <= charts
    latency = next(c for c in payload["charts"] if c["id"] == "latency_s")
    assert [s["label"] for s in latency["series"]] == ["p50", "p90", "p99"] and latency["unit"] == "s"
    assert payload["run"]["kind"] == "evaluation" and payload["run"]["unit"] == "item"
    assert payload["insights"]["attention"] == []  # an eval loop's batches are not loss spikes
    _check_in_browser(html, tmp_path, {"items_per_s", "errors"}, "Evaluation metrics")


@pytest.mark.slow
def test_inference_flow_reports_tokens_ttft_and_errors(flow_dir: Path, tmp_path: Path) -> None:
    proc = _run(
        flow_dir,
        "inference_flow.py",
        "run",
        "--prompts",
        "128",
        "--too_long_every",
        "32",
        "--new_tokens",
        "8",
    )
    pathspec = _pathspec(proc, "InferenceFlow", "generate")
    got = _loaded(flow_dir, pathspec)
    m, s = got["metrics"], got["summary"]
    assert got["status"] == "finished" and "training.infer" in got["phases"]
    assert s["items"] == 128 and s["errors"] == 4 and m["errors"]["values"][-1] == 4
    assert all(v > 0 for v in m["tokens_per_s"]["values"])
    assert all(
        t <= lat for t, lat in zip(m["ttft_p50_s"]["values"], m["latency_p50_s"]["values"], strict=True)
    )
    assert s["tokens_per_s"] == pytest.approx((128 - 4) * 8 / ((128) / s["items_per_s"]), rel=0.05)
    assert any("exceeds the context of 64" in w for w in got["warnings"])

    html = _card(flow_dir, "inference_flow.py", pathspec)
    payload = card_payload(html)
    charts = {c["id"] for c in payload["charts"]}
    assert {"tokens_per_s", "ttft_s", "latency_s", "items_per_s", "error_rate"} <= charts
    assert payload["run"]["kind"] == "inference"
    _check_in_browser(html, tmp_path, {"tokens_per_s", "ttft_s"}, "Inference metrics")
