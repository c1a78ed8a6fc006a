"""The example flow run for real by Metaflow in a subprocess, local datastore, card fetched back.

Its step has ``@traincard`` and a Hugging Face Trainer, and no other line for the card: the
decorator instruments every Trainer made in the step."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser_helpers import open_html, screenshot
from tests.support.helpers import REPO, card_payload, metaflow_client, subprocess_env

pytest.importorskip("metaflow")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def flow_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("flow")
    for name in ("hf_finetune_flow.py", "tiny_gpt2.py"):
        shutil.copy(REPO / "examples" / name, d / name)
    assert "instrument(" not in (d / "hf_finetune_flow.py").read_text()  # @traincard alone
    return d


def run_flow(flow_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(flow_dir), TRAINCARD_SYSTEM_INTERVAL="1")
    proc = subprocess.run(
        [sys.executable, "hf_finetune_flow.py", "--no-pylint", *args],
        cwd=flow_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def get_card(flow_dir: Path, pathspec: str) -> str:
    out = flow_dir / "card.html"
    run_flow(flow_dir, "card", "get", pathspec.split("/", 1)[1], str(out))  # card get wants run/step/task
    return out.read_text()


@pytest.fixture(scope="module")
def finished_run(flow_dir: Path) -> str:
    proc = run_flow(flow_dir, "run", "--max_steps", "60")
    match = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-2000:]
    return f"FinetuneFlow/{match.group(1)}/train/{match.group(2)}"


def client(flow_dir: Path, code: str, pathspec: str) -> Any:
    return metaflow_client(
        code, pathspec, flow_dir, subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(flow_dir))
    )


@pytest.mark.slow
def test_flow_card_shows_the_real_loss_of_the_run(flow_dir: Path, finished_run: str) -> None:
    got = client(
        flow_dir,
        (
            "task = metaflow.Task(sys.argv[1])\n"
            "run = traincard_otel.load(task)\n"
            "print(json.dumps({'history': task['log_history'].data,\n"
            "                  'steps': list(run.metrics['loss'].steps),\n"
            "                  'values': list(run.metrics['loss'].values)}))"
        ),
        finished_run,
    )
    history = got["history"]
    losses = [h["loss"] for h in history if "loss" in h]
    assert got["values"] == losses
    assert got["steps"] == [h["step"] for h in history if "loss" in h]

    html = get_card(flow_dir, finished_run)
    payload = card_payload(html)
    assert payload["final"] is True and not re.search(r"window\.metaflow_card_update\s*=", html)
    loss_chart = next(c for c in payload["charts"] if c["id"] == "loss")
    train = next(s for s in loss_chart["series"] if s["label"] == "train")
    assert train["y"] == losses
    eval_series = next(s for s in loss_chart["series"] if s["label"] == "eval")
    assert eval_series["y"] == [h["eval_loss"] for h in history if "eval_loss" in h]
    assert any(c["id"] == "learning_rate" for c in payload["charts"])
    assert payload["run"]["status"] == "finished" and payload["run"]["step"] == 60
    assert [c["step"] for c in payload["checkpoints"]] == [60]  # save_steps=100: saved at the end
    assert "<script src" not in html and "<link" not in html  # self-contained: nothing fetched


@pytest.mark.slow
def test_failed_task_still_gets_a_final_card_with_the_failure(flow_dir: Path) -> None:
    proc = run_flow(flow_dir, "run", "--max_steps", "60", "--fail_at", "12", check=False)
    assert proc.returncode != 0
    match = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr)
    assert match
    payload = card_payload(get_card(flow_dir, f"FinetuneFlow/{match.group(1)}/train/{match.group(2)}"))
    assert payload["final"] is True
    assert payload["run"]["status"] == "failed"
    assert payload["failure"]["type"] == "RuntimeError"
    assert "synthetic failure at step 12" in payload["failure"]["message"]
    assert payload["banners"][0]["kind"] == "failed"


@pytest.mark.slow
@pytest.mark.browser
def test_the_card_of_a_step_with_only_the_decorator_in_chromium(
    browser: Any,
    flow_dir: Path,
    finished_run: str,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    payload = card_payload(html := get_card(flow_dir, finished_run))
    loss_chart = next(c for c in payload["charts"] if c["id"] == "loss")
    assert {s["label"] for s in loss_chart["series"]} >= {"train", "eval"}
    points = sum(len(s["y"]) for s in loss_chart["series"])
    open_html(browser, html, tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""
    assert "finished" in browser.find_element(By.CSS_SELECTOR, "#tc-status .tc-pill").text.lower()
    loss = browser.find_element(By.CSS_SELECTOR, '.tc-chart[data-chart-id="loss"]')
    assert loss.find_elements(By.TAG_NAME, "canvas") and int(loss.get_attribute("data-points")) == points
    rows = browser.find_elements(By.CSS_SELECTOR, "#tc-checkpoints tbody tr")
    assert [r.get_attribute("data-step") for r in rows] == ["60"]
    screenshot(browser, "decorator-alone")
