"""Comparison with a baseline run: where this run stands against an earlier one at the same step.

Two figures are compared, both at the current run's latest step:

``metric``
    The main metric, the training loss (:func:`main_metric`: ``loss``, else ``train_loss``,
    ``train/loss``, else the first other name with ``loss`` in it that is not an evaluation
    metric). Lower is better. Each run's value is the mean of its finite values over the last
    :data:`WINDOW_STEPS` steps up to that step (``(step - WINDOW_STEPS, step]``), so one noisy
    batch does not decide it. The run is *ahead* when its value is lower than the baseline's by
    more than :data:`LEVEL_FRACTION` of the baseline's, *behind* when higher by as much, *level*
    otherwise.
``step_time``
    Time per step (rank 0's step ends, or the lowest rank that timed steps): the median over the
    same window in each run; the baseline's median over its whole run when its steps do not reach
    the window. Faster is ahead.

A baseline that never reached the current step is compared at its own last step for neither
figure: the text says where it ended. Everything here is pure: the caller finds and reads the
baseline (:func:`traincard_otel.load` with ``baseline=``; the card through the ``baseline`` setting).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, cast

from .._schema.keys import is_tagged
from .._types import JsonObject, JsonValue

if TYPE_CHECKING:
    from .._data.rundata import RunData, Series

WINDOW_STEPS: Final = 20
LEVEL_FRACTION: Final = 0.005  # within half a percent: level
_LOSS_NAMES: Final = ("loss", "train_loss", "train/loss", "training_loss")
_EVAL_PREFIXES: Final = ("eval", "val", "test", "valid")

Verdict = Literal["ahead", "behind", "level"]
_WHERE: Final[dict[Verdict, str]] = {
    "ahead": "ahead of baseline",
    "behind": "behind baseline",
    "level": "level with baseline",
}


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The run a card or :func:`traincard_otel.load` compares with.

    ``label`` names it (a pathspec ``Flow/run/step/task``, or what the user named); ``run_id`` is
    its Metaflow run id when it has one (the chart legends say ``baseline <run_id>``). ``data`` is
    its :class:`traincard_otel.RunData`, or None when there is none or it could not be read: then
    ``note`` says why, in words the card shows as they are.
    """

    label: str
    data: RunData | None = None
    note: str | None = None
    run_id: str | None = None

    @property
    def short(self) -> str:
        """``baseline <run id>`` (or ``baseline <label>`` without a run id), for legends."""
        return f"baseline {self.run_id or self.label}"


@dataclasses.dataclass(frozen=True)
class Figure:
    """One compared figure at ``step``: this run's value, the baseline's, and what it means."""

    name: str  # the metric name, or "time per step"
    step: int
    value: float
    baseline: float
    verdict: Verdict
    relative: float  # (value - baseline) / |baseline|; negative: lower than the baseline
    text: str

    def as_dict(self) -> JsonObject:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Where a run stands against its baseline at its latest step (either figure may be None,
    and ``notes`` say why)."""

    baseline: str
    step: int | None
    metric: Figure | None
    step_time: Figure | None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> JsonObject:
        return {
            "baseline": self.baseline,
            "step": self.step,
            "metric": self.metric.as_dict() if self.metric else None,
            "step_time": self.step_time.as_dict() if self.step_time else None,
            "notes": list(self.notes),
        }


def _is_eval(name: str) -> bool:
    lower = name.lower()
    return any(
        lower.startswith(p) and lower[len(p) : len(p) + 1] in ("_", "/", "-", ".") for p in _EVAL_PREFIXES
    )


def main_metric(names: Sequence[str] | Mapping[str, JsonValue]) -> str | None:
    """The training loss among ``names`` (metric keys of a run), or None when it has none."""
    keys = [k for k in names if not is_tagged(k)]
    for name in _LOSS_NAMES:
        if name in keys:
            return name
    return next((k for k in sorted(keys) if "loss" in k.lower() and not _is_eval(k)), None)


def _finite(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


_sorted_cache: dict[int, tuple[Sequence[int | None], int, bool]] = {}


def _in_order(steps: Sequence[int | None]) -> bool:
    """Whether ``steps`` never decrease and hold no None (checked again only when they grow)."""
    hit = _sorted_cache.get(id(steps))
    if hit is not None and hit[0] is steps and hit[1] == len(steps):
        return hit[2]
    try:
        ordered = cast("Sequence[int]", steps)
        ok = all(map(operator.le, ordered, itertools.islice(ordered, 1, None)))
    except TypeError:  # a None among them
        ok = False
    if len(_sorted_cache) > 256:
        _sorted_cache.clear()
    _sorted_cache[id(steps)] = (steps, len(steps), ok)
    return ok


def last_step(series: Series) -> int | None:
    """The highest step ``series`` reached (None if no point has a step)."""
    steps = series.steps
    if steps and _in_order(steps):
        return cast("int", steps[-1])
    found = [s for s in steps if isinstance(s, int)]
    return max(found) if found else None


def window(series: Series, step: int, width: int = WINDOW_STEPS) -> list[float]:
    """The finite values of ``series`` at steps in ``(step - width, step]``."""
    lo = step - width
    steps, values = series.steps, series.values
    if _in_order(steps):  # the common case: two bisections, whatever the run's length
        ordered = cast("Sequence[int]", steps)
        a, b = bisect.bisect_right(ordered, lo), bisect.bisect_right(ordered, step)
        pairs: Iterable[tuple[int | None, float]] = zip(steps[a:b], values[a:b], strict=False)
    else:
        pairs = zip(steps, values, strict=False)
    out = []
    for s, v in pairs:
        if isinstance(s, int) and lo < s <= step:
            f = _finite(v)
            if f is not None:
                out.append(f)
    return out


def _verdict(relative: float, lower_is_better: bool = True) -> Verdict:
    if abs(relative) <= LEVEL_FRACTION:
        return "level"
    better = relative < 0 if lower_is_better else relative > 0
    return "ahead" if better else "behind"


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.3g}"
    return f"{v:.4g}"


def _fmt_s(v: float) -> str:
    return f"{v * 1000:.3g} ms" if v < 1 else f"{v:.3g} s"


def _pct(relative: float) -> str:
    p = round(abs(relative) * 100, 1)  # 9.99999 and 10.00001 read alike: "10 %"
    return f"{p:.1f} %" if p < 10 else f"{p:.0f} %"


def _metric_figure(name: str, step: int, mine: list[float], theirs: list[float]) -> Figure:
    value, base = statistics.fmean(mine), statistics.fmean(theirs)
    relative = (
        (value - base) / abs(base)
        if base
        else (0.0 if value == base else math.copysign(math.inf, value - base))
    )
    verdict = _verdict(relative)
    how = "" if verdict == "level" else f" ({_pct(relative)} {'lower' if relative < 0 else 'higher'})"
    text = f"{name} {_WHERE[verdict]} at step {step}: {_fmt(value)} vs {_fmt(base)}{how}"
    return Figure(name, step, value, base, verdict, relative, text)


def _time_figure(step: int, mine: list[float], theirs: list[float]) -> Figure:
    value, base = statistics.median(mine), statistics.median(theirs)
    relative = (value - base) / base if base > 0 else 0.0
    verdict = _verdict(relative)
    how = "" if verdict == "level" else f" ({_pct(relative)} {'faster' if relative < 0 else 'slower'})"
    text = f"time per step {_WHERE[verdict]} at step {step}: {_fmt_s(value)} vs {_fmt_s(base)}{how}"
    return Figure("time per step", step, value, base, verdict, relative, text)


def _timing_series(run: RunData) -> Series | None:
    times = run.step_times
    return times[min(times)] if times else None


def compare(run: RunData, baseline: RunData, label: str) -> Comparison:
    """Where ``run`` stands against ``baseline`` (named ``label``) at ``run``'s latest step."""
    notes: list[str] = []
    name = main_metric(run.metrics)
    series = run.metrics.get(name) if name else None
    timing = _timing_series(run)
    step = last_step(series) if series is not None else None
    if step is None and timing is not None:
        step = last_step(timing)
    metric_fig: Figure | None = None
    if name is None or series is None:
        notes.append("no training loss in this run to compare")
    elif name not in baseline.metrics:
        notes.append(f"{label} has no {name} to compare")
    elif step is not None:
        theirs_series = baseline.metrics[name]
        theirs_end = last_step(theirs_series)
        mine, theirs = window(series, step), window(theirs_series, step)
        if theirs_end is not None and theirs_end < step - WINDOW_STEPS:
            notes.append(f"{label} ended at step {theirs_end}, before step {step}")
        elif mine and theirs:
            metric_fig = _metric_figure(name, step, mine, theirs)
    step_fig: Figure | None = None
    base_timing = _timing_series(baseline)
    if timing is not None and base_timing is not None and step is not None:
        mine_t = [v for v in window(timing, step) if v > 0]
        theirs_t = [v for v in window(base_timing, step) if v > 0]
        if not theirs_t:  # the baseline's steps do not reach this window: its typical step
            theirs_t = [v for v in (_finite(x) for x in base_timing.values) if v is not None and v > 0]
        if mine_t and theirs_t:
            step_fig = _time_figure(step, mine_t, theirs_t)
    return Comparison(label, step, metric_fig, step_fig, tuple(notes))
