"""A target's card, drawn down the read side once: locate the store, load it, analyse it, build
the payload, draw the page (``traincard render``, the Metaflow card, ``LoadedRun._repr_html_``)."""

from __future__ import annotations

import dataclasses

from .._analysis.analysis import analyse
from .._safety import internal_error
from .._types import JsonObject
from .baseline import load_baseline
from .card.render import render_data
from .load.summaries import branches, read_summary
from .load.target import read_located
from .locate import Located, locate
from .payload.contract import SweepSection
from .payload.sweep import sweep_section

#: The longest a card render waits for its baseline: Metaflow gives a card render 45 s in all.
BASELINE_TIMEOUT_S = 20.0


@dataclasses.dataclass(frozen=True)
class RenderedCard:
    """A target's card page and the status of the run it shows (``None`` before any)."""

    html: str
    status: str | None


def render_target(
    target: object,
    *,
    live: bool = False,
    final: bool = True,
    hourly_cost: float | None = None,
    baseline: str | None = None,
) -> RenderedCard:
    """Load ``target`` (see :func:`traincard_otel.load`, ``baseline`` included) and render its card.

    A baseline that cannot be found or read (within ``BASELINE_TIMEOUT_S``) is a note in the card:
    only ``target`` itself can fail.
    """
    found = locate(target)
    data = read_located(found)
    base = None
    if baseline is not None:
        base = load_baseline(found.pathspec, baseline, timeout_s=BASELINE_TIMEOUT_S)
    compared = _compared(found)
    insights = analyse(data, baseline=base)
    sweep = _sweep_section(compared, standalone=not data.metrics, live=live)
    html = render_data(
        data,
        live=live,
        final=final,
        hourly_cost=hourly_cost,
        baseline=base,
        insights=insights,
        sweep=sweep,
    )
    status = data.status.get("status")
    return RenderedCard(html, status if isinstance(status, str) else None)


@dataclasses.dataclass(frozen=True)
class _Compared:
    """The stored summaries a task's Sweep section compares: its own and its siblings' (or the
    branches it joins), under ``title``."""

    own: str
    title: str
    summaries: dict[str, JsonObject]


def _compared(found: Located) -> _Compared | None:
    """The summaries of the tasks the task compares (its foreach siblings, or the branches it
    joins), read from the store; None for a task that is neither."""
    try:
        own = read_summary(found.backend)
        compared = branches(found.backend, own) if own is not None else None
        if own is None or compared is None:
            return None
        title, summaries = compared
        return _Compared(str(own.get("pathspec") or ""), title, summaries)
    except Exception as exc:  # the task's own card still renders
        internal_error("the card's Sweep section", exc)
        return None


def _sweep_section(compared: _Compared | None, *, standalone: bool, live: bool) -> SweepSection | None:
    """The Sweep section of the task's card drawn from ``compared``."""
    if compared is None:
        return None
    try:
        return sweep_section(
            compared.summaries, title=compared.title, own=compared.own, live=live, standalone=standalone
        )
    except Exception as exc:  # the task's own card still renders
        internal_error("the card's Sweep section", exc)
        return None
