"""A read run's card page: its payload (:mod:`..payload`) drawn as one self-contained HTML page."""

from __future__ import annotations

import html
import time
from collections.abc import Mapping

from ..._analysis.analysis import Insights
from ..._analysis.baseline import Baseline
from ..._data.rundata import RunData
from ..._types import JsonObject
from ..payload import build_payload
from ..payload.contract import SweepSection
from ..payload.sweep import sweep_section
from .page import assemble_html


def render_data(
    data: RunData,
    *,
    live: bool,
    final: bool,
    hourly_cost: float | None = None,
    baseline: Baseline | None = None,
    insights: Insights | None = None,
    sweep: SweepSection | None = None,
) -> str:
    """The card HTML for already-read ``data``, as analysed (``insights``, compared with
    ``baseline``), with ``sweep`` as its Sweep section."""
    payload = build_payload(
        data,
        live=False,
        final=final,
        hourly_cost=hourly_cost,
        baseline=baseline,
        insights=insights,
        sweep=sweep,
    )
    return assemble_html(payload, live=live)


def render_comparison(summaries: Mapping[str, JsonObject], title: str, *, final: bool = True) -> str:
    """The comparison card of several tasks (the branches of a foreach, or runs) from their
    summaries: the Sweep section alone."""
    section = sweep_section(summaries, title=title, standalone=True)
    payload = build_payload(RunData(source=title), final=final, sweep=section)
    return assemble_html(payload, live=False)


def error_html(title: str, message: str) -> str:
    """A minimal card saying why the real one could not be drawn (never an exception)."""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>traincard</title></head><body "
        "style='font-family:system-ui,sans-serif;padding:1em'>"
        f"<h3>{html.escape(title)}</h3><pre style='white-space:pre-wrap'>{html.escape(message)}</pre>"
        f"<p style='color:#888'>rendered {html.escape(time.strftime('%Y-%m-%d %H:%M:%S'))}</p></body></html>"
    )
