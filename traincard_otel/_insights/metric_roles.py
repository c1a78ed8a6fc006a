"""Which anomaly rules watch a metric, from its name: a training loss, a gradient norm, an
evaluation metric and which way is better, an RL run's KL and reward spread
(:mod:`.anomalies`)."""

from __future__ import annotations

import re
from typing import Final, Literal

_WORD = re.compile(r"[a-z0-9]+")
_LOWER_BETTER: Final = (
    "loss",
    "error",
    "err",
    "perplexity",
    "ppl",
    "wer",
    "cer",
    "mse",
    "mae",
    "rmse",
    "nll",
)
_HIGHER_BETTER: Final = (
    "acc",
    "accuracy",
    "f1",
    "precision",
    "recall",
    "auc",
    "auroc",
    "bleu",
    "rouge",
    "map",
    "iou",
    "dice",
    "exact",
    "em",
    "top1",
    "top5",
    "r2",
)
_EVAL_PREFIXES: Final = ("eval", "val", "validation", "valid", "test")


def direction(name: str) -> Literal[-1, 1] | None:
    """-1 when lower is better (loss, error, perplexity ...), 1 when higher is (accuracy, F1 ...),
    None when the name says neither. Matched on the name's words and their prefixes
    (``eval_loss``, ``val/acc_top1``, ``test-f1``, ``rouge1``)."""
    words = _WORD.findall(name.lower())
    if any(w.endswith("loss") or w in _LOWER_BETTER for w in words):
        return -1
    if any(w in _HIGHER_BETTER or w.startswith(("acc", "rouge", "bleu", "f1")) for w in words):
        return 1
    return None


Role = Literal["loss", "grad", "eval", "finite", "kl", "spread", "std", "none"]
_ZERO_SPREAD: Final = "frac_reward_zero_std"


def role(name: str, phase: str | None = None) -> Role:
    """Which rules watch a metric: a training loss, a gradient norm, an eval metric (by its name's
    prefix), a loss or gradient norm outside training (``finite``: only NaN/inf is judged; batch to
    batch differences of an evaluation or inference loop are not spikes), an RL run's KL, share of
    groups with zero reward spread or reward standard deviation (training only), or none."""
    lower = name.lower()
    words = _WORD.findall(lower)
    if words and words[0] in _EVAL_PREFIXES:
        return "eval" if direction(name) is not None else "none"
    if phase is None or phase == "train":
        if lower.endswith(_ZERO_SPREAD):
            return "spread"
        if "kl" in words:
            return "kl"
        if lower.endswith(("reward_std", "scores_std")):  # the total's: one reward function may be constant
            return "std"
    watched: Role = "grad" if "grad" in lower and "norm" in lower else "loss" if "loss" in lower else "none"
    if watched != "none" and phase is not None and phase != "train":
        return "finite"
    return watched
