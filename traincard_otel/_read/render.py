"""A target's card, drawn down the read side once: locate the store, load it, analyse it, build
the payload, draw the page (``traincard render``, the Metaflow card, ``LoadedRun._repr_html_``)."""

from __future__ import annotations

import dataclasses

from .._analysis.analysis import analyse
from .._data.rundata import RunData
from .._safety import internal_error
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
    html = render_data(
        data,
        live=live,
        final=final,
        hourly_cost=hourly_cost,
        baseline=base,
        insights=analyse(data, baseline=base),
        sweep=_sweep_of(found, data, live=live),
    )
    status = data.status.get("status")
    return RenderedCard(html, status if isinstance(status, str) else None)


def _sweep_of(found: Located, data: RunData, *, live: bool) -> SweepSection | None:
    """The Sweep section of the task's card, from the task's stored summary and those of the tasks
    it compares (its foreach siblings, or the branches it joins); None for a task that is neither."""
    try:
        own = read_summary(found.backend)
        compared = branches(found.backend, own) if own is not None else None
        if own is None or compared is None:
            return None
        title, summaries = compared
        return sweep_section(
            summaries,
            title=title,
            own=str(own.get("pathspec") or ""),
            live=live,
            standalone=not data.metrics,
        )
    except Exception as exc:  # the task's own card still renders
        internal_error("the card's Sweep section", exc)
        return None
