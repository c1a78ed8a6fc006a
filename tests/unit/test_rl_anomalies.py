"""RL anomaly kinds: a reward collapse (no reward spread left) and a KL blow-up, each on its own
and through a real pipeline, named like any other anomaly kind."""

from __future__ import annotations

import random

from traincard_otel._analysis.anomalies import AnomalyDetector, AnomalyRules, role
from traincard_otel._schema import ANOMALY_KIND_NAMES, Attr, Event
from traincard_otel.testing import capture


def test_rl_names_have_their_roles() -> None:
    assert [
        role(n) for n in ("kl", "objective/kl", "frac_reward_zero_std", "reward_std", "objective/scores_std")
    ] == ["kl", "kl", "spread", "std", "std"]
    assert role("rewards/star/std") == "none"  # one reward function may be constant by design
    assert role("reward") == "none" and role("rewards/star/mean") == "none" and role("kl", "eval") == "none"
    assert {"reward_collapse", "kl_blowup"} <= set(ANOMALY_KIND_NAMES)


def test_reward_collapse_is_flagged_once_per_stretch() -> None:
    det = AnomalyDetector(AnomalyRules(collapse_steps=3))
    shares = [0.2, 0.5, 1.0, 1.0, 0.3, 1.0, 1.0, 1.0, 1.0, 1.0]
    found = [(s, a.kind) for s, v in enumerate(shares, 1) for a in det.observe(s, "frac_reward_zero_std", v)]
    assert found == [(8, "reward_collapse")]  # 6, 7, 8 in a row; not again while it lasts
    std = [0.4, 0.0, 0.0, 0.0]
    found = [a for s, v in enumerate(std, 1) for a in det.observe(s, "reward_std", v)]
    assert [(a.step, a.kind) for a in found] == [(4, "reward_collapse")]
    assert "no longer tell completions apart" in found[0].message


def test_kl_blowup_above_the_ceiling_or_far_above_its_median() -> None:
    rng = random.Random(0)
    det = AnomalyDetector(AnomalyRules(window=20, min_points=10, cooldown=5))
    kls = [0.01 + 0.002 * rng.random() for _ in range(30)] + [0.5] + [0.011] * 10 + [12.0]
    found = [(s, a.kind) for s, v in enumerate(kls, 1) for a in det.observe(s, "kl", v)]
    assert found == [(31, "kl_blowup"), (42, "kl_blowup")]
    early = AnomalyDetector()
    assert [a.kind for a in early.observe(1, "kl", 50.0)] == ["kl_blowup"]  # the ceiling needs no window


def test_rl_anomalies_go_out_as_anomaly_events() -> None:
    with capture() as cap:
        r = cap.reporter
        for step in range(1, 31):
            r.metrics(
                {"kl": 0.01 if step != 25 else 15.0, "frac_reward_zero_std": 1.0 if step > 10 else 0.25}, step
            )
            r.step_end(step, duration_s=0.01)
        run = cap.load()
    got = {
        (e["attributes"][Attr.STEP], e["attributes"][Attr.ANOMALY_KIND])
        for e in run.events
        if e["name"] == Event.ANOMALY
    }
    assert got >= {(15, "reward_collapse"), (25, "kl_blowup")}
    assert {k for _s, k in got} <= {"reward_collapse", "kl_blowup", "throughput_drop"}
