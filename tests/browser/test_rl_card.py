"""TRL's GRPOTrainer under instrument(): the RL layout and the completions table, in Chromium.

One GRPO run (a tiny GPT-2, a word-level tokenizer built here, two reward functions, a few steps
of four-token completions) per module; every test reads what it stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.payload import LIVE_MAX_BYTES, Mode, build_payload
from traincard_otel._read.payload.rl import rl_charts
from traincard_otel._read.payload.training import chart_name
from traincard_otel._read.run import LoadedRun

from tests.support.browser_helpers import open_html, screenshot

WORDS = ["<pad>", "<unk>", "star", "moon", "sun", "sky", "<b>", "&amp;", "go", "stop"]


def star_reward(completions: list[str], **kwargs: object) -> list[float]:
    return [float(c.count("star")) for c in completions]


def short_reward(completions: list[str], **kwargs: object) -> list[float]:
    return [-0.1 * len(c.split()) for c in completions]


class Trained:
    def __init__(self, run: LoadedRun, trainer: Any) -> None:
        self.run, self.trainer = run, trainer


@pytest.fixture(scope="module")
def grpo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trained]:
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from examples.tiny_gpt2 import tiny_gpt2

    tmp = tmp_path_factory.mktemp("grpo")
    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="stop"
    )
    prompts = [" ".join(WORDS[2 + (i + j) % 8] for j in range(3)) for i in range(32)]
    config = trl.GRPOConfig(
        output_dir=str(tmp / "out"),
        max_steps=4,
        logging_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=4,
        beta=0.1,  # a reference model, so the KL is logged
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    policy = tmp / "policy"  # the reference model is loaded from the policy's path
    tiny_gpt2(vocab=len(WORDS)).save_pretrained(policy)
    trainer = trl.GRPOTrainer(
        model=str(policy),
        reward_funcs=[star_reward, short_reward],
        args=config,
        processing_class=tokenizer,
        train_dataset=datasets.Dataset.from_dict({"prompt": prompts}),
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINCARD_DIR", str(tmp / "store"))
        mp.setenv("TRAINCARD_SYSTEM", "false")
        traincard_otel.instrument(trainer)
        trainer.train()
        traincard_otel.shutdown()
        yield Trained(traincard_otel.load(tmp / "store"), trainer)


@pytest.mark.slow
def test_the_run_is_rl_with_its_figures_grouped(grpo: Trained) -> None:
    payload = build_payload(grpo.run, final=True)
    assert payload["run"]["kind"] == "rl"
    groups: dict[str, list[str]] = {}
    for chart in payload["charts"]:
        groups.setdefault(chart["group"], []).append(chart["id"])
    assert groups["rewards"][:3] == ["rl_reward", "rl_reward_short_reward", "rl_reward_star_reward"]
    assert "rl_zero_spread" in groups["rewards"]
    assert {"rl_kl", "rl_entropy", "rl_clip_ratio"} <= set(groups["policy"])
    assert {"rl_length", "rl_completions/clipped_ratio"} <= set(groups["completions"])
    # the total reward: its mean and a band one std either side, at every logged step
    reward = next(c for c in payload["charts"] if c["id"] == "rl_reward")
    mean, hi, lo = reward["series"]
    logged = [h for h in grpo.trainer.state.log_history if "reward" in h]
    assert list(mean["y"]) == [h["reward"] for h in logged]
    assert [hi.get("band"), lo.get("band")] == ["hi", "lo"]
    assert list(hi["y"]) == pytest.approx([h["reward"] + h["reward_std"] for h in logged])
    length = next(c for c in payload["charts"] if c["id"] == "rl_length")
    assert [s["label"] for s in length["series"]] == ["min", "mean", "max"]
    # the usual sections stay: the loss and the step time, and no RL figure twice
    training = groups["training"]
    assert "loss" in training and "step_time" in training
    assert not any(i in training for i in ("reward", "kl", "entropy", "completions/mean_length"))
    # every metric the run logged is in an RL chart, a training chart or the summary: none is lost
    _rl, in_rl = rl_charts(grpo.run, Mode(live=False))
    summary = {row["name"] for row in payload["summary"]}
    for key in grpo.run.metrics:
        assert key in in_rl or chart_name(key)[0] in training or key in summary or key == "epoch", key
    assert {"num_tokens", "loss", "grad_norm"} <= set(training)


@pytest.mark.slow
def test_completions_come_from_the_trainer_not_the_console(grpo: Trained) -> None:
    rows = grpo.run.to_rows("completions")
    steps = sorted({r["step"] for r in rows})
    assert steps == [1, 2, 3, 4]
    assert grpo.run.completions.seen == len(rows) == 4 * 4  # four completions a step, all kept
    last = [r for r in rows if r["step"] == 4]
    logs = grpo.trainer._logs
    assert [r["completion"] for r in last] == list(logs["completion"])
    assert [r["prompt"] for r in last] == list(logs["prompt"])
    assert [r["star_reward"] for r in last] == pytest.approx(list(logs["rewards"]["star_reward"]))
    assert [r["short_reward"] for r in last] == pytest.approx(list(logs["rewards"]["short_reward"]))
    assert [r["advantage"] for r in last] == pytest.approx(list(logs["advantages"]))
    live = build_payload(grpo.run, live=True)  # a live update: the latest step's rows, small
    assert live["completions"] is not None and {r["step"] for r in live["completions"]["rows"]} == {4}
    assert len(json.dumps(live)) <= LIVE_MAX_BYTES
    assert {c["group"] for c in live["charts"]} >= {"rewards", "policy", "completions", "training"}
    frame = grpo.run.to_pandas("completions")
    assert list(frame.columns) == ["step", "prompt", "completion", "star_reward", "short_reward", "advantage"]


def _open(browser: Any, tmp_path: Path, payload: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    open_html(browser, assemble_html(payload, live=False), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""


@pytest.mark.browser
def test_the_card_draws_the_rl_sections_and_a_searchable_table(
    browser: Any, tmp_path: Path, grpo: Trained
) -> None:
    from selenium.webdriver.common.by import By

    payload = build_payload(grpo.run, final=True)
    # a long completion, and text that would be markup if it were not escaped
    row = payload["completions"]["rows"][0]
    row["completion"] = "<img src=x onerror=alert(1)> " + "sky " * 200
    _open(browser, tmp_path, payload)
    for group, title in (("rewards", "Rewards"), ("policy", "Policy"), ("completions", "Completions")):
        section = browser.find_element(By.ID, f"tc-rl-{group}")
        assert (
            section.is_displayed()
            and section.find_element(By.CSS_SELECTOR, ".tc-h2 span").get_attribute("textContent") == title
        )
        assert section.find_elements(By.CSS_SELECTOR, ".tc-chart canvas")
    band = browser.find_element(By.CSS_SELECTOR, '[data-chart-id="rl_reward"]')
    assert band.get_attribute("data-band") == "1"
    table = browser.find_elements(By.CSS_SELECTOR, "#tc-completions tbody tr")
    assert len(table) == len(payload["completions"]["rows"]) == 16
    assert browser.find_elements(By.CSS_SELECTOR, "#tc-completions img") == []
    fold = table[0].find_element(By.CSS_SELECTOR, "details.tc-comp-fold")
    assert not fold.get_attribute("open") and "<img src=x" in fold.find_element(By.TAG_NAME, "summary").text
    heads = [
        th.get_attribute("textContent")
        for th in browser.find_elements(By.CSS_SELECTOR, "#tc-completions thead th")
    ]
    assert heads == ["step", "prompt", "completion", "star_reward", "short_reward", "advantage"]
    # searching keeps the rows whose prompt or completion has the text
    needle = payload["completions"]["rows"][3]["prompt"].split()[0]
    search = browser.find_element(By.ID, "tc-comp-search")
    search.send_keys("<img src")
    visible = [r for r in table if r.is_displayed()]
    assert len(visible) == 1
    search.clear()
    search.send_keys(needle)
    expected = sum(needle in (r["prompt"] + "\n" + r["completion"]) for r in payload["completions"]["rows"])
    assert len([r for r in table if r.is_displayed()]) == expected
    screenshot(browser, "card-rl")
