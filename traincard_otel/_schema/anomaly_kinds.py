"""The anomaly kinds: one name each, the same everywhere.

The detector (:mod:`traincard_otel._analysis.anomalies`) emits these names as
``traincard.anomaly.kind``; ``stop_on`` and ``notify_on`` accept them; the card labels them and the
alert rules in ``collector-config/`` select them; ``docs/schema.md`` lists them with their meaning.
Each is spelled here only (``tests/unit/test_names.py`` fails on a copy elsewhere).
"""

from __future__ import annotations

from typing import Final, NamedTuple


class AnomalyKind:
    """The names, as ``traincard.anomaly.kind`` carries them and ``stop_on`` takes them."""

    LOSS_SPIKE: Final = "loss_spike"
    NAN: Final = "nan"
    GRAD_EXPLOSION: Final = "grad_explosion"
    THROUGHPUT_DROP: Final = "throughput_drop"
    EVAL_REGRESSION: Final = "eval_regression"
    REWARD_COLLAPSE: Final = "reward_collapse"
    KL_BLOWUP: Final = "kl_blowup"


#: Names stores written by earlier versions carry, read as today's kind.
RENAMED: Final = {"nonfinite": AnomalyKind.NAN}


class AnomalyKindSpec(NamedTuple):
    """One kind: its name, how the card labels it, what it means, and whether it is critical (the
    run's results cannot be trusted from there on: the card shows it as an error, the alert rule
    for it is critical)."""

    name: str
    label: str
    meaning: str
    critical: bool = False


ANOMALY_KINDS: Final = (
    AnomalyKindSpec(
        AnomalyKind.LOSS_SPIKE,
        "loss spike",
        "a training loss far above the median of its recent values (in median absolute deviations)",
    ),
    AnomalyKindSpec(
        AnomalyKind.NAN, "NaN/inf", "NaN or infinity in a loss or a gradient norm", critical=True
    ),
    AnomalyKindSpec(
        AnomalyKind.GRAD_EXPLOSION,
        "grad norm explosion",
        "a gradient norm many times the median of its recent values",
    ),
    AnomalyKindSpec(
        AnomalyKind.THROUGHPUT_DROP,
        "throughput drop",
        "tokens (else samples, else steps) per second below a fraction of the recent median for "
        "several steps in a row",
    ),
    AnomalyKindSpec(
        AnomalyKind.EVAL_REGRESSION,
        "eval regression",
        "an evaluation metric worse than its best value so far by more than a margin",
    ),
    AnomalyKindSpec(
        AnomalyKind.REWARD_COLLAPSE,
        "reward collapse",
        "an RL run's rewards no longer tell completions apart (no spread within groups)",
    ),
    AnomalyKindSpec(
        AnomalyKind.KL_BLOWUP,
        "KL blow-up",
        "the KL divergence from the reference policy above a limit, or far above its recent median",
    ),
)
#: The names, in the order above.
ANOMALY_KIND_NAMES: Final = tuple(k.name for k in ANOMALY_KINDS)
#: The kinds that are critical (``AnomalyKindSpec.critical``).
CRITICAL_ANOMALY_KINDS: Final = frozenset(k.name for k in ANOMALY_KINDS if k.critical)
