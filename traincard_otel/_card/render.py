"""Render the card for a store, a Metaflow task or a directory (used by the card and the CLI)."""

from __future__ import annotations

import html
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from .._data.rundata import RunData
from .._insights.baseline import Baseline
from .._run import LoadedRun
from .._safety import internal_error
from .._types import JsonObject
from ._html import assemble_html
from .payload import build_payload
from .payload.contract import SweepSection
from .payload.sweep import sweep_section
from .sweep import stored_section

#: The longest a card render waits for its baseline: Metaflow gives a card render 45 s in all.
BASELINE_TIMEOUT_S = 20.0


def render_data(
    data: RunData,
    *,
    live: bool,
    final: bool,
    hourly_cost: float | None = None,
    baseline: Baseline | None = None,
    sweep: SweepSection | None = None,
) -> str:
    """The card HTML for already-read ``data`` (compared with ``baseline``, else a loaded run's own,
    whose analysis it draws), with ``sweep`` as its Sweep section."""
    insights = None
    if isinstance(data, LoadedRun) and (baseline is None or baseline is data.baseline):
        baseline, insights = data.baseline, data.insights  # analysed when loaded
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


def render_target(
    target: object,
    *,
    live: bool = False,
    final: bool = True,
    hourly_cost: float | None = None,
    baseline: str | None = None,
) -> str:
    """Load ``target`` (see :func:`traincard_otel.load`, ``baseline`` included) and render its card.

    A baseline that cannot be found or read (within ``BASELINE_TIMEOUT_S``) is a note in the card:
    only ``target`` itself can fail.
    """
    from .._load import load_baseline, read

    data, _ = read(target)
    base = None
    if baseline is not None:
        pathspec = getattr(target, "pathspec", None)
        base = load_baseline(
            pathspec if isinstance(pathspec, str) else None, baseline, timeout_s=BASELINE_TIMEOUT_S
        )
    return render_data(
        data, live=live, final=final, hourly_cost=hourly_cost, baseline=base, sweep=_sweep_of(target, data)
    )


def _sweep_of(target: object, data: RunData) -> SweepSection | None:
    """The Sweep section of ``target``'s card: its foreach siblings or the branches it joins."""
    from .._targets import backend_for

    try:
        backend, _title = backend_for(target)
        return stored_section(backend, live=False, standalone=not data.metrics)
    except Exception as exc:  # the task's own card still renders
        internal_error("the card's Sweep section", exc)
        return None


def render_comparison(summaries: Mapping[str, JsonObject], title: str, *, final: bool = True) -> str:
    """The comparison card of several tasks (the branches of a foreach, or runs) from their
    summaries: the Sweep section alone."""
    section = sweep_section(summaries, title=title, standalone=True)
    payload = build_payload(RunData(source=title), final=final, sweep=section)
    return assemble_html(payload, live=False)


def write_card(path: str | os.PathLike[str], page: str) -> int:
    """Write ``page`` to ``path`` whole or not at all (a temp file beside it, then a rename).

    Returns the bytes written. A failure leaves any earlier file at ``path`` as it was.
    """
    target = Path(path)
    data = page.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(data)


def error_html(title: str, message: str) -> str:
    """A minimal card saying why the real one could not be drawn (never an exception)."""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>traincard</title></head><body "
        "style='font-family:system-ui,sans-serif;padding:1em'>"
        f"<h3>{html.escape(title)}</h3><pre style='white-space:pre-wrap'>{html.escape(message)}</pre>"
        f"<p style='color:#888'>rendered {html.escape(time.strftime('%Y-%m-%d %H:%M:%S'))}</p></body></html>"
    )
