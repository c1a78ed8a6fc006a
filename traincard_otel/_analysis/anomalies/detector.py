"""The anomaly detector: applies :class:`~.rules.AnomalyRules` to a run's rows in report order
(the rules: :mod:`traincard_otel._analysis.anomalies`)."""

from __future__ import annotations

import collections
import math
import operator
from collections.abc import Sequence
from typing import NamedTuple

from ..._schema.anomaly_kinds import AnomalyKind
from .roles import Role, direction, role
from .rules import AnomalyRules
from .window import MAD_SCALE, RollingWindow


class Anomaly(NamedTuple):
    """One flagged point: what kind, at which step, on which metric, and why in one line."""

    kind: str  # an AnomalyKind
    step: int | None
    name: str
    value: float
    expected: float | None  # the median, or the best value, it was judged against
    message: str


class _Watched:
    """A metric's state: its window, the cooldown left, whether it is non-finite now."""

    __slots__ = ("cooldown", "not_finite", "window")

    def __init__(self, size: int) -> None:
        self.window = RollingWindow(size)
        self.cooldown = 0
        self.not_finite = False


class _Best:
    __slots__ = ("flagged", "step", "value")

    def __init__(self, value: float, step: int | None) -> None:
        self.value, self.step, self.flagged = value, step, False


def nonfinite_message(name: str, value: float, step: int | None) -> str:
    """What a ``nan`` anomaly says: ``"loss is nan at step 12"``."""
    return f"{name} is {_fmt(value)} at step {step}"


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
        self._rate = RollingWindow(self.rules.window)
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
            if w.not_finite:
                return []
            w.not_finite = True
            return [Anomaly(AnomalyKind.NAN, step, name, value, None, nonfinite_message(name, value, step))]
        w.not_finite = False
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
                                    AnomalyKind.LOSS_SPIKE,
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
                        AnomalyKind.GRAD_EXPLOSION,
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

    def _kl_blowup(self, step: int | None, name: str, value: float, win: RollingWindow) -> Anomaly | None:
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
            AnomalyKind.KL_BLOWUP,
            step,
            name,
            value,
            expected,
            f"{name} {_fmt(value)} at step {step} is {why}",
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
                AnomalyKind.REWARD_COLLAPSE,
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
            return []  # an eval loss of NaN is judged by the nan rule only if it is a loss
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
            AnomalyKind.EVAL_REGRESSION,
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
            self._rate, self._rate_basis, self._slow, self._in_drop = RollingWindow(r.window), basis, 0, False
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
                            AnomalyKind.THROUGHPUT_DROP,
                            step,
                            basis,
                            rate,
                            med,
                            f"{basis} {_fmt(rate)} at step {step}, below {r.throughput_fraction:.0%} of "
                            f"the median of the last {len(win)} steps ({_fmt(med)}) for {self._slow} "
                            f"steps since step {self._slow_since}",
                        )
                    )
                    self.counts[AnomalyKind.THROUGHPUT_DROP] += 1
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
