"""Goodput: a run's wall time split into productive training and everything else.

:func:`goodput` reads what the store holds for one rank (rank 0, or the lowest rank that timed
steps) and assigns every second from the first attempt's start to the run's end (now, while it
runs) to exactly one category:

``productive``
    Training steps (each step end's duration; the HF and Lightning adapters time a step from the
    previous step end, evaluation and saving excluded), less the three below that happen inside
    steps: their data wait, their stalls, and steps that a restart re-computes.
``data_wait``
    The steps' measured wait for their batch (every step, the re-computed ones included).
``startup``
    From the first attempt's start to its first step's start (imports, model load, data set-up).
``eval``
    Evaluation phases (``eval``, ``evaluate``, ``validation``, ``test``, ``infer``, ``predict`` ...);
    step ends reported inside one are evaluation steps, not training.
``checkpoint``
    Checkpoint phases (``save``, ``checkpoint``, ``load``, ``restore``).
``stall``
    What the watchdog declared stalled (``traincard.stall.*`` events), wherever it happened.
``restart``
    Time a retry or resume costs: the compute time of steps run again (a step number at or below
    one an earlier attempt or stretch already reached; their data wait stays under ``data_wait``),
    the gap between one attempt's end and the next one's start, and a later attempt's time before
    its first step and a failed attempt's time after its last step. A redone step's data wait is
    known for the last 1000 timed steps of a rank (the reader keeps no more); before that, the
    run's average wait share stands in for it.
``shutdown``
    From the last step's end to the run's end.
``other``
    Whatever is left: time between steps that no step, phase or stall accounts for (a loop that
    reports its steps' durations itself may not count all of its time), and, while the run is
    still running, the time since its last step end (the step in progress).

Phases and stalls are few, so they are resolved exactly (a stall wins over a phase, a checkpoint
phase over an evaluation phase, and both over the steps they overlap); steps are read as the
reader's columns, at C speed and only the new ones on a live card's refresh (:mod:`.steps`), never
walked one interval at a time.

The categories, the phases each one takes (:func:`phase_category`), how overlapping phases and
stalls resolve (:func:`disjoint`) and how step time splits (:func:`split_steps`, :func:`add_edges`,
:func:`settle`) are defined here once, and which steps run again in :func:`.steps.recomputed`:
the read-time :func:`goodput` and the writer's streaming :class:`~.goodput_tally.GoodputTally`
both use them.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from .._schema import PHASE_SPAN_PREFIX, Attr, Event
from .._types import JsonObject
from .steps import TimedSteps, inside

if TYPE_CHECKING:
    from .._data.rundata import RunData

CATEGORIES: Final = (
    "productive",
    "data_wait",
    "startup",
    "eval",
    "checkpoint",
    "stall",
    "restart",
    "shutdown",
    "other",
)
EVAL_PHASES: Final = frozenset(
    {
        "eval",
        "evaluate",
        "evaluation",
        "validation",
        "validate",
        "val",
        "test",
        "infer",
        "inference",
        "predict",
        "prediction",
        "generate",
    }
)
CHECKPOINT_PHASES: Final = frozenset({"save", "checkpoint", "load", "restore", "resume"})
PRIORITY: Final = {"stall": 3, "checkpoint": 2, "eval": 1}
#: The special categories: time in a phase or a stall, whatever steps it overlaps.
SPECIAL: Final = tuple(PRIORITY)

Piece = tuple[float, float, str]  # (start, end, category) of a phase or a stall


@dataclasses.dataclass(frozen=True)
class Goodput:
    """Seconds per category (:data:`CATEGORIES`, summing to ``wall_s``) for one rank."""

    wall_s: float
    seconds: dict[str, float]
    rank: int
    attempts: int
    running: bool

    @property
    def ratio(self) -> float | None:
        """Productive share of the wall time (None for an empty run)."""
        return self.seconds["productive"] / self.wall_s if self.wall_s > 0 else None

    @property
    def badput_s(self) -> float:
        """Everything that was not productive training."""
        return self.wall_s - self.seconds["productive"]

    def as_dict(self) -> JsonObject:
        return {
            "wall_s": self.wall_s,
            "seconds": dict(self.seconds),
            "ratio": self.ratio,
            "badput_s": self.badput_s,
            "rank": self.rank,
            "attempts": self.attempts,
            "running": self.running,
        }


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _int(value: object) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def phase_category(phase: str) -> str | None:
    """``eval`` or ``checkpoint`` for a phase of that kind (by its name), else None."""
    name = phase.lower()
    if name in EVAL_PHASES:
        return "eval"
    if name in CHECKPOINT_PHASES:
        return "checkpoint"
    return None


def span_category(span_name: str) -> str | None:
    """:func:`phase_category` of a ``training.<phase>`` span (None for any other span)."""
    if not span_name.startswith(PHASE_SPAN_PREFIX):
        return None
    return phase_category(span_name[len(PHASE_SPAN_PREFIX) :])


def disjoint(pieces: Sequence[Piece]) -> list[Piece]:
    """Overlapping labelled intervals as disjoint ones, the higher priority winning each instant."""
    bounds = sorted({b for t0, t1, _c in pieces for b in (t0, t1)})
    out: list[Piece] = []
    for lo, hi in itertools.pairwise(bounds):
        mid = (lo + hi) / 2
        best = max((c for t0, t1, c in pieces if t0 <= mid < t1), key=lambda c: PRIORITY[c], default=None)
        if best is None:
            continue
        if out and out[-1][2] == best and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi, best)
        else:
            out.append((lo, hi, best))
    return out


def overlap(lo: float, hi: float, pieces: Sequence[Piece]) -> float:
    """Seconds of ``pieces`` (disjoint) inside [lo, hi)."""
    return sum(max(0.0, min(hi, t1) - max(lo, t0)) for t0, t1, _c in pieces)


def split_steps(
    step_total: float, wait_total: float, redone_waited: float, redone_unknown: float
) -> tuple[float, float, float]:
    """(data wait, restart, productive) seconds of the counted step time ``step_total``.

    ``wait_total``: every timed step's measured wait; ``redone_waited``: the re-computed steps'
    time less their own measured wait; ``redone_unknown``: the time of re-computed steps whose
    wait is not known, which the run's average wait share is taken from.
    """
    waited = min(wait_total, max(step_total, 0.0))
    wait_share = waited / step_total if step_total > 0 else 0.0
    redone = redone_waited + redone_unknown * (1 - wait_share)
    redone = min(redone, max(step_total - waited, 0.0))
    return waited, redone, max(0.0, step_total - waited - redone)


def add_edges(
    seconds: dict[str, float],
    window: tuple[float, float],
    steps: tuple[float, float] | None,
    special: Sequence[Piece],
    *,
    first: bool,
    last: bool,
    running: bool,
) -> None:
    """Add one attempt's stretches before its first step and after its last one to ``seconds``.

    ``window``: the attempt's (start, end); ``steps``: its first step's start and last step's end
    (None: it timed no step); ``special``: the run's phases and stalls, disjoint. Before the first
    step is start-up in the first attempt and a restart's cost in a later one; after the last step
    is a restart's cost unless it is the last attempt, whose tail is shutdown, or, while it runs,
    the step in progress (``other``).
    """
    start, end = window
    first_start, last_end = steps if steps is not None else (end, end)
    head = max(0.0, first_start - start - overlap(start, first_start, special))
    tail = max(0.0, end - last_end - overlap(last_end, end, special))
    seconds["startup" if first else "restart"] += head
    if not last:
        seconds["restart"] += tail
    else:
        seconds["other" if running else "shutdown"] += tail


def settle(seconds: dict[str, float], wall: float) -> dict[str, float]:
    """``seconds`` with ``other`` made the rest of ``wall``, never summing above it, all finite."""
    accounted = sum(v for k, v in seconds.items() if k != "other")
    seconds["other"] = max(0.0, wall - accounted)
    if accounted > wall:  # overlapping records (clock steps between processes): never above the wall
        scale = wall / accounted if accounted > 0 else 0.0
        seconds = {k: v * scale for k, v in seconds.items()}
    return {k: (v if math.isfinite(v) else 0.0) for k, v in seconds.items()}


def goodput(run: RunData, now: float | None = None) -> Goodput | None:
    """The goodput of ``run`` (see the module docstring); None when it timed no steps.

    ``now``: the end of a run still running (its last record otherwise, or when not given).
    """
    if not run.step_times:
        return None
    rank = 0 if 0 in run.step_times else min(run.step_times)
    series = run.step_times[rank]
    if not len(series.values):
        return None
    steps = TimedSteps(series)
    # A store is read as it is: records of a hostile or damaged one may hold anything.
    states = sorted(
        (s for s in run.states if _int(s.get("rank")) == rank), key=lambda s: _int(s.get("attempt"))
    )
    events = [e for e in run.events if _int(e.get("rank")) == rank and _num(e.get("time")) is not None]
    phases = [
        p
        for p in run.phases
        if _int(p.get("rank")) == rank and _num(p.get("t0")) is not None and _num(p.get("t1")) is not None
    ]

    # Attempt windows: from the state's start to its last word (a phase, event or step may be later).
    windows: dict[int, list[float]] = {}
    for s in states:
        start = _num(s.get("started_at"))
        end = _num(s.get("updated_at")) or start
        if start is not None and end is not None:
            windows[_int(s.get("attempt"))] = [start, end]
    spans = steps.attempt_spans()
    for a, (_first, final, start) in spans.items():
        w = windows.setdefault(a, [start, steps.ends[final]])
        w[0], w[1] = min(w[0], start), max(w[1], steps.ends[final])
    for p in phases:
        t0, t1 = float(p["t0"]), float(p["t1"])
        w = windows.setdefault(_int(p.get("attempt")), [t0, t1])
        w[0], w[1] = min(w[0], t0), max(w[1], t1)
    last_attempt = max(windows)
    running = bool(states) and states[-1].get("status") == "running"
    if running and now is not None:
        windows[last_attempt][1] = max(windows[last_attempt][1], now)
    run_end = windows[last_attempt][1]

    # Phases and stalls, made disjoint.
    pieces: list[Piece] = []
    for p in phases:
        category = span_category(str(p.get("n", "")))
        if category is not None and float(p["t1"]) > float(p["t0"]):
            pieces.append((float(p["t0"]), float(p["t1"]), category))
    open_stall: float | None = None
    for e in sorted(events, key=lambda e: float(e["time"])):
        attrs = e.get("attributes") or {}
        if e.get("name") == Event.STALL_STARTED:
            open_stall = float(e["time"]) - (_num(attrs.get(Attr.STALL_IDLE_S)) or 0.0)
        elif e.get("name") == Event.STALL_CLEARED:
            t = float(e["time"])
            start = t - (_num(attrs.get(Attr.STALL_DURATION_S)) or 0.0)
            pieces.append((open_stall if open_stall is not None else start, t, "stall"))
            open_stall = None
    if open_stall is not None and open_stall < run_end:
        pieces.append((open_stall, run_end, "stall"))
    special = disjoint(pieces)

    seconds = dict.fromkeys(CATEGORIES, 0.0)
    # Step ends inside an evaluation phase are evaluation steps: their time is the phase's.
    for t0, t1, category in special:
        if category != "stall":
            steps.exclude(t0, t1)
    step_total, recomputed = steps.counted()  # recomputed: index ranges of the steps run again
    in_special = 0.0
    for t0, t1, category in special:
        seconds[category] += t1 - t0
        in_special += steps.overlap(t0, t1)
    step_total -= in_special

    # A redone step's own wait where the reader still holds it (its last 1000 waits), else the
    # run's average share.
    kept = run.data_wait.get(rank)
    known = dict(zip(kept.times, kept.values, strict=False)) if kept is not None else {}
    redone_waited = redone_known = 0.0
    for t, wait in known.items():  # the redone steps whose wait is known: their own
        for i in range(bisect.bisect_left(steps.ends, t), bisect.bisect_right(steps.ends, t)):
            if inside(i, recomputed):
                d = steps.durations[i]
                redone_known += d
                redone_waited += d - min(wait, d)
    wait_total = _num(run.data_wait_total.get(rank, 0.0)) or 0.0
    seconds["data_wait"], seconds["restart"], seconds["productive"] = split_steps(
        step_total, wait_total, redone_waited, steps.total(recomputed) - redone_known
    )

    # The stretches before an attempt's first step and after its last one, and between attempts.
    first_start = min(w[0] for w in windows.values())
    ordered = sorted(windows.items())
    for k, (attempt, (start, end)) in enumerate(ordered):
        span = spans.get(attempt)
        edges = (steps.ends[span[0]] - steps.durations[span[0]], steps.ends[span[1]]) if span else None
        add_edges(
            seconds,
            (start, end),
            edges,
            special,
            first=k == 0,
            last=k == len(ordered) - 1,
            running=running,
        )
        if k + 1 < len(ordered):
            gap_end = ordered[k + 1][1][0]
            seconds["restart"] += max(0.0, gap_end - end - overlap(end, gap_end, special))

    wall = max(run_end - first_start, 0.0)
    return Goodput(
        wall_s=wall, seconds=settle(seconds, wall), rank=rank, attempts=len(windows), running=running
    )
