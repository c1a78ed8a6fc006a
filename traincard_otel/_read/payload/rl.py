"""The RL layout: an online RL trainer's figures grouped as Rewards, Policy and Completions.

Chosen by the run (:data:`~.kind.RL`: the adapter said the trainer is an online RL trainer). The
names are TRL's (GRPO, RLOO; PPO's ``objective/*`` and ``policy/*`` too):

* **Rewards**: the total (``reward``) and each reward function (``rewards/<name>/mean``), each
  drawn as its mean with a band of one standard deviation either side (``reward_std``,
  ``rewards/<name>/std``), and ``frac_reward_zero_std``, the share of groups whose completions
  all scored the same (they teach the policy nothing); other ``reward``/``score`` figures beside.
* **Policy**: the KL divergence from the reference, the entropy, the clipping ratios in one chart.
* **Completions**: the length distribution (min, mean and max; terminated completions apart) and
  the share clipped at the maximum length.

Every other metric keeps the training section's layout: an unknown metric still gets its chart.
"""

from __future__ import annotations

import re
from typing import Final

from ..._data.rundata import RunData, Series
from .contract import ChartRow, ChartSeriesRow
from .series import Mode
from .training import series_entries

REWARDS: Final = "rewards"
POLICY: Final = "policy"
COMPLETIONS: Final = "completions"
GROUPS: Final = {REWARDS: "Rewards", POLICY: "Policy", COMPLETIONS: "Completions"}

_REWARD = re.compile(r"(?:^|/)(?:rewards?|scores?|rlhf_reward|frac_reward_zero_std)(?:$|/|_)")
_POLICY = re.compile(r"(?:^|/)(?:kl|entropy|clip_ratio|clipfrac|approxkl|policy/)|^policy/")
_LENGTH = re.compile(r"^completions/(?P<kind>min|mean|max)_(?P<which>terminated_)?length$")


def group_of(name: str) -> str | None:
    """The RL group a metric belongs to (None: the training section's)."""
    if name.startswith("eval_"):
        return None
    if name.startswith("completions/"):
        return COMPLETIONS
    if _REWARD.search(name):
        return REWARDS
    if _POLICY.search(name):
        return POLICY
    return None


def _band(mean: Series, std: Series, sign: float) -> Series:
    """``mean`` plus ``sign`` standard deviations, at the steps both were reported."""
    spread = dict(zip(std.steps, std.values, strict=True))
    idx = [i for i, s in enumerate(mean.steps) if s in spread]
    return Series(
        name=mean.name,
        tags=mean.tags,
        steps=[mean.steps[i] for i in idx],
        values=[mean.values[i] + sign * spread[mean.steps[i]] for i in idx],
        times=[mean.times[i] for i in idx],
        attempts=[mean.attempts[i] for i in idx],
        ranks=[mean.ranks[i] for i in idx],
    )


def _chart(chart_id: str, title: str, group: str, unit: str, series: list[ChartSeriesRow]) -> ChartRow:
    return {"id": chart_id, "title": title, "group": group, "unit": unit, "x": "step", "series": series}


def _with_band(mean: Series, std: Series | None, label: str, mode: Mode) -> list[ChartSeriesRow]:
    out = series_entries(mean, label, mode)
    if std is not None and len(std):
        for sign, edge, op in ((1.0, "hi", "+"), (-1.0, "lo", "\u2212")):
            for entry in series_entries(_band(mean, std, sign), f"{label} {op}1 std", mode):
                entry["band"] = edge
                out.append(entry)
    return out


def rl_charts(data: RunData, mode: Mode) -> tuple[list[ChartRow], set[str]]:
    """(the RL groups' charts, the metric keys they drew, which the training section skips)."""
    plain = {key: s for key, s in data.metrics.items() if not s.tags}
    grouped = {key: group_of(s.name) for key, s in plain.items()}
    used: set[str] = set()
    charts: list[ChartRow] = []

    def take(key: str) -> Series | None:
        if key in plain and grouped.get(key) is not None:
            used.add(key)
            return plain[key]
        return None

    # Rewards: the total, then each reward function, mean with its std band.
    total = take("reward")
    if total is not None:
        charts.append(
            _chart(
                "rl_reward",
                "reward (total)",
                REWARDS,
                "1",
                _with_band(total, take("reward_std"), "mean", mode),
            )
        )
    functions = sorted({k.split("/")[1] for k in plain if re.fullmatch(r"rewards/[^/]+/(?:mean|std)", k)})
    for fn in functions:
        mean = take(f"rewards/{fn}/mean")
        std = take(f"rewards/{fn}/std")
        if mean is not None:
            charts.append(
                _chart(f"rl_reward_{fn}", f"reward: {fn}", REWARDS, "1", _with_band(mean, std, "mean", mode))
            )
        elif std is not None:
            charts.append(
                _chart(
                    f"rl_reward_{fn}_std", f"reward std: {fn}", REWARDS, "1", series_entries(std, "std", mode)
                )
            )
    zero = take("frac_reward_zero_std")
    if zero is not None:
        charts.append(
            _chart(
                "rl_zero_spread",
                "groups with zero reward spread",
                REWARDS,
                "1",
                series_entries(zero, "share", mode),
            )
        )

    # Policy: KL and entropy, then every clipping ratio in one chart.
    clip = [k for k in sorted(plain) if grouped[k] == POLICY and ("clip" in k)]
    if clip:
        entries = [e for k in clip for e in series_entries(plain[k], k.split("/", 1)[-1], mode)]
        used.update(clip)
        charts.append(_chart("rl_clip_ratio", "clip ratio", POLICY, "1", entries))

    # Completions: the length distribution, then the rest (the clipped share ...).
    for which, title in (("", "completion length"), ("terminated_", "terminated completion length")):
        entries = []
        for kind in ("min", "mean", "max"):
            s = take(f"completions/{kind}_{which}length")
            if s is not None:
                entries += series_entries(s, kind, mode)
        if entries:
            charts.append(_chart(f"rl_{which}length", title, COMPLETIONS, "tokens", entries))

    for key in sorted(plain):  # what the groups hold besides: one chart each
        group = grouped[key]
        if group is not None and key not in used:
            used.add(key)
            charts.append(
                _chart(f"rl_{key}", _title(key), group, "1", series_entries(plain[key], "train", mode))
            )
    order = list(GROUPS)
    charts.sort(key=lambda c: order.index(c["group"]))  # stable: the order above within a group
    return charts, used


def _title(key: str) -> str:
    if key == "completions/clipped_ratio":
        return "clipped completions (share)"
    return key
