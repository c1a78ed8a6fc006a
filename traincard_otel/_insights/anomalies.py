"""Anomalies in a training run, found row by row as the converter hands the rows on.

:class:`AnomalyDetector` is fed every accepted metric value (:meth:`~AnomalyDetector.observe`)
and every timed step end (:meth:`~AnomalyDetector.observe_step`) in report order, and returns
the anomalies each one reveals. It keeps a bounded window per watched metric, so its memory does
not grow with the run. The rules, each with its :class:`AnomalyRules` field:

``loss_spike``
    A training loss (a name containing ``loss``, reported outside any phase or in ``train``)
    more than ``spike_mads`` median absolute deviations (scaled by 1.4826, so one MAD estimates
    one standard deviation of normal noise) *above* the median of its last ``window`` values, and
    more than ``spike_min_relative`` of that median above it (a plateau has a MAD near zero: a
    rounding-level wiggle is not a spike). Only upward jumps count: a loss falling fast is the
    point of training. Needs ``min_points`` values first; after a spike, ``cooldown`` further
    values of that metric are not flagged again (one divergence is one event, not fifty).
``nonfinite``
    NaN or infinity in a loss or a gradient norm (``grad_norm``, ``gradient_norm``, ``grad-norm``:
    a name with ``grad`` and ``norm`` in it), in any phase. Flagged once when it starts; flagged
    again only after a finite value has been seen.
``grad_explosion``
    A gradient norm more than ``grad_factor`` times the median of its last ``window`` values
    (after ``min_points``), with the same cooldown.
``throughput_drop``
    Tokens per second (samples per second where no tokens are counted, steps per second where
    neither is) below ``throughput_fraction`` of the median of the last ``window`` steps for
    ``throughput_steps`` steps in a row. Flagged once per drop; a step back above the threshold
    ends it.
``eval_regression``
    An evaluation metric (a name starting with ``eval``, ``val``, ``validation``, ``valid`` or
    ``test``, as trainers name them) worse than the best value so far by more than
    ``eval_margin`` (relative to the best's magnitude). Which way is better comes from the name
    (:func:`direction`); a name that says neither is not judged. Flagged once per best value.
``reward_collapse``
    An RL run's rewards stopped telling completions apart: the share of groups whose completions
    all scored the same (``frac_reward_zero_std``, TRL's name) at least ``collapse_share``, or a
    total reward's standard deviation (``reward_std``, ``objective/scores_std``; not one reward
    function's, which may be constant by design) at most ``collapse_std``, for ``collapse_steps``
    reports in a row. With no spread the advantages are zero and the policy learns nothing.
    Flagged once per stretch.
``kl_blowup``
    The KL divergence from the reference policy (a name with the word ``kl``: ``kl``,
    ``objective/kl``) above ``kl_max``, or more than ``kl_factor`` times the median of its last
    ``window`` values (after ``min_points``), with the same cooldown as a loss spike.

``TRAINCARD_ANOMALIES`` sets the rules for a run: ``off``, or comma-separated ``field=value``
pairs (``spike_mads=8,window=100``); :meth:`AnomalyRules.parse` reads it and fails loudly on a
field or value it does not know.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import math
import operator
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

from .metric_roles import Role, direction, role

Kind = Literal[
    "loss_spike",
    "nonfinite",
    "grad_explosion",
    "throughput_drop",
    "eval_regression",
    "reward_collapse",
    "kl_blowup",
]
KINDS: Final[tuple[Kind, ...]] = (
    "loss_spike",
    "nonfinite",
    "grad_explosion",
    "throughput_drop",
    "eval_regression",
    "reward_collapse",
    "kl_blowup",
)
MAD_SCALE: Final = 1.4826  # MAD x this estimates the standard deviation of normally distributed noise


@dataclasses.dataclass(frozen=True)
class AnomalyRules:
    """The thresholds of the rules in this module's docstring."""

    window: int = 50
    min_points: int = 20
    spike_mads: float = 6.0
    spike_min_relative: float = 0.1
    cooldown: int = 10
    grad_factor: float = 10.0
    throughput_fraction: float = 0.5
    throughput_steps: int = 10
    eval_margin: float = 0.05
    collapse_share: float = 0.95
    collapse_std: float = 1e-6
    collapse_steps: int = 5
    kl_max: float = 10.0
    kl_factor: float = 10.0

    def __post_init__(self) -> None:
        if self.window < 3 or not 2 <= self.min_points <= self.window:
            raise ValueError(f"need window >= 3 and 2 <= min_points <= window; got {self}")
        if self.throughput_steps < 1 or self.cooldown < 0 or self.collapse_steps < 1:
            raise ValueError(f"need throughput_steps >= 1, collapse_steps >= 1 and cooldown >= 0; got {self}")
        for name in (
            "spike_mads",
            "spike_min_relative",
            "grad_factor",
            "eval_margin",
            "collapse_share",
            "collapse_std",
            "kl_max",
            "kl_factor",
        ):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be a number >= 0; got {getattr(self, name)!r}")
        if not 0 < self.throughput_fraction < 1:
            raise ValueError(f"throughput_fraction must be between 0 and 1; got {self.throughput_fraction!r}")

    @classmethod
    def parse(cls, text: str) -> AnomalyRules | None:
        """Rules from ``TRAINCARD_ANOMALIES``'s text: ``off`` is None (no detection), ``""`` the
        defaults, else ``field=value`` pairs separated by commas.

        Raises:
            ValueError: an unknown field, a value that is not a number, or a rule out of range;
                the message names what to change.
        """
        text = text.strip()
        if text.lower() in ("off", "false", "0", "no", "none"):
            return None
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, float | int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            name = name.strip()
            if not sep or name not in fields:
                raise ValueError(
                    f"TRAINCARD_ANOMALIES: {part!r} is not field=value with a field among "
                    f"{', '.join(fields)} (or 'off')"
                )
            try:
                values[name] = int(raw) if fields[name] == "int" else float(raw)
            except ValueError:
                raise ValueError(f"TRAINCARD_ANOMALIES: {name}={raw.strip()!r} is not a number") from None
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"TRAINCARD_ANOMALIES: {exc}") from None


class Anomaly(NamedTuple):
    """One flagged point: what kind, at which step, on which metric, and why in one line."""

    kind: Kind
    step: int | None
    name: str
    value: float
    expected: float | None  # the median, or the best value, it was judged against
    message: str


# -- a rolling window with its median ----------------------------------------------------------
class _Window:
    """The last ``size`` values in arrival order and sorted (median in O(1), update in O(size) memmove)."""

    __slots__ = ("_order", "mad", "mad_age", "sorted")

    def __init__(self, size: int) -> None:
        self._order: collections.deque[float] = collections.deque(maxlen=size)
        self.sorted: list[float] = []
        self.mad: float | None = None  # cached; recomputed every few values and before a verdict
        self.mad_age = 0

    def __len__(self) -> int:
        return len(self.sorted)

    def add(self, value: float) -> None:
        order = self._order
        if len(order) == order.maxlen:
            old = order[0]
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        order.append(value)
        bisect.insort(self.sorted, value)
        self.mad_age += 1

    def extend(self, values: list[float]) -> None:
        """:meth:`add` each of ``values``, in one sort."""
        self._order.extend(values)
        self.sorted = sorted(self._order)
        self.mad_age += len(values)

    def median(self) -> float:
        s, n = self.sorted, len(self.sorted)
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

    def fresh_mad(self) -> float:
        med = self.median()
        dev = sorted(abs(v - med) for v in self.sorted)
        n = len(dev)
        self.mad = dev[n // 2] if n % 2 else (dev[n // 2 - 1] + dev[n // 2]) / 2
        self.mad_age = 0
        return self.mad


class _Watched:
    """A metric's state: its window, the cooldown left, whether it is non-finite now."""

    __slots__ = ("cooldown", "nonfinite", "window")

    def __init__(self, size: int) -> None:
        self.window = _Window(size)
        self.cooldown = 0
        self.nonfinite = False


class _Best:
    __slots__ = ("flagged", "step", "value")

    def __init__(self, value: float, step: int | None) -> None:
        self.value, self.step, self.flagged = value, step, False


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    return f"{v:.4g}"


class AnomalyDetector:
    """Applies :class:`AnomalyRules` to a run's rows, fed in report order (not thread-safe: the
    converter feeds it under its own lock)."""

    def __init__(self, rules: AnomalyRules | None = None) -> None:
        self.rules = rules or AnomalyRules()
        self._roles: dict[tuple[str, str | None], Role] = {}
        self._watched: dict[str, _Watched] = {}
        self._best: dict[str, _Best] = {}
        self._rate = _Window(self.rules.window)
        self._rate_basis: str | None = None
        self._slow = 0  # consecutive steps below the throughput threshold
        self._slow_since: int | None = None
        self._in_drop = False
        self._collapse: dict[str, int] = {}  # reports in a row without reward spread, per metric
        self.counts: collections.Counter[str] = collections.Counter()

    def role(self, name: str, phase: str | None = None) -> Role:
        """:func:`role`, cached per (name, phase)."""
        key = (name, phase)
        found = self._roles.get(key)
        if found is None:
            found = self._roles[key] = role(name, phase)
        return found

    def observe(self, step: int | None, name: str, value: float, phase: str | None = None) -> list[Anomaly]:
        """One accepted metric value; the anomalies it reveals (most often none)."""
        kind = self.role(name, phase)
        if kind == "none":
            return []
        if kind == "spread" or kind == "std":
            found = self._collapsed(step, name, value, kind)
        elif kind == "eval":
            found = self._eval(step, name, value)
        else:
            found = self._rolling(step, name, value, kind)
        for a in found:
            self.counts[a.kind] += 1
        return found

    def _rolling(self, step: int | None, name: str, value: float, kind: Role) -> list[Anomaly]:
        r = self.rules
        w = self._watched.get(name)
        if w is None:
            w = self._watched[name] = _Watched(r.window)
        if not math.isfinite(value):
            if w.nonfinite:
                return []
            w.nonfinite = True
            return [Anomaly("nonfinite", step, name, value, None, f"{name} is {_fmt(value)} at step {step}")]
        w.nonfinite = False
        if kind == "finite":
            return []
        win = w.window
        out: list[Anomaly] = []
        if w.cooldown:
            w.cooldown -= 1
        elif len(win.sorted) >= r.min_points:
            med = win.median()
            if kind == "loss":
                excess = value - med
                if excess > r.spike_min_relative * abs(med):
                    cached = win.mad if win.mad is not None and win.mad_age < r.window // 5 else None
                    # the cached MAD screens cheaply; a candidate is judged on a fresh one
                    if cached is None or excess > 0.5 * r.spike_mads * MAD_SCALE * cached:
                        mad = win.fresh_mad()
                        sigma = MAD_SCALE * mad
                        if excess > r.spike_mads * sigma:
                            n = excess / sigma if sigma > 0 else math.inf
                            out.append(
                                Anomaly(
                                    "loss_spike",
                                    step,
                                    name,
                                    value,
                                    med,
                                    f"{name} {_fmt(value)} at step {step} is {_fmt(n)} MADs above the "
                                    f"median of the last {len(win)} values ({_fmt(med)})",
                                )
                            )
            elif kind == "kl":
                pass  # judged below, with or without a window
            elif med > 0 and value > r.grad_factor * med:
                out.append(
                    Anomaly(
                        "grad_explosion",
                        step,
                        name,
                        value,
                        med,
                        f"{name} {_fmt(value)} at step {step} is {_fmt(value / med)}x the median of the "
                        f"last {len(win)} values ({_fmt(med)})",
                    )
                )
            if out:
                w.cooldown = r.cooldown
        if kind == "kl" and not out and not w.cooldown:
            kl = self._kl_blowup(step, name, value, win)
            if kl is not None:
                out.append(kl)
                w.cooldown = r.cooldown
        win.add(value)
        return out

    def _kl_blowup(self, step: int | None, name: str, value: float, win: _Window) -> Anomaly | None:
        r = self.rules
        if value > r.kl_max:
            why = f"above {_fmt(r.kl_max)}"
        elif len(win.sorted) >= r.min_points and 0 < win.median() < value / r.kl_factor:
            med = win.median()
            why = f"{_fmt(value / med)}x the median of the last {len(win)} values ({_fmt(med)})"
        else:
            return None
        expected = win.median() if len(win.sorted) else None
        return Anomaly(
            "kl_blowup", step, name, value, expected, f"{name} {_fmt(value)} at step {step} is {why}"
        )

    def _collapsed(self, step: int | None, name: str, value: float, kind: Role) -> list[Anomaly]:
        r = self.rules
        flat = value >= r.collapse_share if kind == "spread" else abs(value) <= r.collapse_std
        if not flat or not math.isfinite(value):
            self._collapse[name] = 0
            return []
        n = self._collapse[name] = self._collapse.get(name, 0) + 1
        if n != r.collapse_steps:
            return []
        what = "groups with no reward spread" if kind == "spread" else "reward standard deviation"
        shown = f"{value:.0%}" if kind == "spread" else _fmt(value)
        return [
            Anomaly(
                "reward_collapse",
                step,
                name,
                value,
                None,
                f"{name}: {what} {shown} for {n} reports in a row up to step {step}: the rewards no longer "
                "tell completions apart, so the policy gets no signal",
            )
        ]

    def _eval(self, step: int | None, name: str, value: float) -> list[Anomaly]:
        if not math.isfinite(value):
            return []  # an eval loss of NaN is judged by the nonfinite rule only if it is a loss
        sign = direction(name)
        assert sign is not None  # role() said so
        best = self._best.get(name)
        if best is None or (value - best.value) * sign > 0:
            self._best[name] = _Best(value, step)
            return []
        worse = (best.value - value) * sign
        if best.flagged or worse <= self.rules.eval_margin * abs(best.value):
            return []
        best.flagged = True
        share = worse / abs(best.value) if best.value else math.inf
        found = Anomaly(
            "eval_regression",
            step,
            name,
            value,
            best.value,
            f"{name} {_fmt(value)} at step {step} is {share:.0%} worse than the best, "
            f"{_fmt(best.value)} at step {best.step}",
        )
        return [found]

    def observe_step(
        self, step: int | None, duration_s: float, tokens: int = 0, samples: int = 0
    ) -> list[Anomaly]:
        """One timed step end (``duration_s`` > 0); a throughput drop when it completes one."""
        if not duration_s > 0 or not math.isfinite(duration_s):
            return []
        if tokens:
            basis, rate = "tokens/s", tokens / duration_s
        elif samples:
            basis, rate = "samples/s", samples / duration_s
        else:
            basis, rate = "steps/s", 1.0 / duration_s
        r = self.rules
        if basis != self._rate_basis:  # a different measure: start again
            self._rate, self._rate_basis, self._slow, self._in_drop = _Window(r.window), basis, 0, False
        win, out = self._rate, []
        if len(win.sorted) >= r.min_points:
            med = win.median()
            if rate < r.throughput_fraction * med:
                if self._slow == 0:
                    self._slow_since = step
                self._slow += 1
                if self._slow >= r.throughput_steps and not self._in_drop:
                    self._in_drop = True
                    out.append(
                        Anomaly(
                            "throughput_drop",
                            step,
                            basis,
                            rate,
                            med,
                            f"{basis} {_fmt(rate)} at step {step}, below {r.throughput_fraction:.0%} of "
                            f"the median of the last {len(win)} steps ({_fmt(med)}) for {self._slow} "
                            f"steps since step {self._slow_since}",
                        )
                    )
                    self.counts["throughput_drop"] += 1
                # a slow stretch stays out of the window, so it cannot become the norm it is judged by
                return out
            self._slow, self._in_drop = 0, False
        win.add(rate)
        return out

    def observe_steps(
        self, steps: Sequence[int], durations: Sequence[float], tokens: Sequence[int], samples: Sequence[int]
    ) -> list[tuple[int, Anomaly]]:
        """Step ends in order, as :meth:`observe_step` judges each one; the anomalies with the
        index of the step that revealed each.

        The usual stretch (every step timed, one measure, none slower than half the fastest rate
        the window or the stretch holds) cannot complete a drop: its rates go into the window at
        C speed. Any other stretch is judged a step at a time.
        """
        r = self.rules
        n = len(durations)
        if n and len(self._rate) >= r.min_points and min(durations) > 0 and math.isfinite(sum(durations)):
            rates: list[float] | None = None
            if self._rate_basis == "tokens/s" and 0 not in tokens:
                rates = list(map(operator.truediv, tokens, durations))
            elif not any(tokens):
                if self._rate_basis == "samples/s" and 0 not in samples:
                    rates = list(map(operator.truediv, samples, durations))
                elif self._rate_basis == "steps/s" and not any(samples):
                    rates = [1.0 / d for d in durations]
            if rates is not None and min(rates) >= r.throughput_fraction * max(
                max(rates), self._rate.sorted[-1]
            ):
                self._slow, self._in_drop = 0, False
                self._rate.extend(rates)
                return []
        out = []
        for i in range(n):
            for a in self.observe_step(steps[i], durations[i], tokens[i], samples[i]):
                out.append((i, a))
        return out

    def rewound(self) -> None:
        """The step counter went back (a resume): a slow stretch in progress ends there."""
        self._slow, self._in_drop = 0, False
