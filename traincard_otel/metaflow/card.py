"""The ``traincard`` card type for Metaflow: ``@card(type="traincard")``.

Live: ``render_runtime`` draws the page once from the store; afterwards the step process pushes
small payloads (:mod:`traincard_otel.metaflow.refresher`) that ``refresh`` hands to the page's
``metaflow_card_update``. Final: ``render`` reads the whole store (every attempt and rank),
downsamples, and writes a static page. Errors become a readable error card, never a crash.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping

from metaflow.cards import MetaflowCard

from .. import environment_variables as ev
from .._read.card.render import error_html
from .._read.render import render_target
from .._types import Foreign, JsonObject, JsonValue


class TraincardCard(MetaflowCard):
    """Live training dashboard. Options: ``hourly_cost`` (price per hour, shows cost and cost at ETA),
    ``baseline`` (the run to compare with; default: ``TRAINCARD_BASELINE``, which ``@traincard``
    sets for the step, else ``auto``)."""

    type = "traincard"  # type: ignore[assignment]
    ALLOW_USER_COMPONENTS = False
    RUNTIME_UPDATABLE = True
    RELOAD_POLICY = MetaflowCard.RELOAD_POLICY_NEVER

    def __init__(
        self,
        options: Mapping[str, JsonValue] | None = None,  # the decorator's options, JSON
        components: object = None,
        graph: object = None,
        flow: object = None,
        **kwargs: object,
    ) -> None:
        self._options = dict(options or {})

    def _hourly(self) -> float | None:
        raw = self._options.get("hourly_cost")
        try:
            return float(raw) if raw is not None else None
        except (TypeError, ValueError):
            return None

    def _baseline(self) -> str:
        raw = self._options.get("baseline")
        if raw is None:
            raw = os.environ.get(ev.TRAINCARD_BASELINE)
        return "auto" if raw is None else str(raw)

    def _render(self, task: Foreign, *, live: bool, final: bool) -> str:
        try:
            return render_target(
                task, live=live, final=final, hourly_cost=self._hourly(), baseline=self._baseline()
            ).html
        except Exception:
            return error_html("traincard could not read this task's telemetry", traceback.format_exc())

    def render_runtime(self, task: Foreign, data: JsonObject | None) -> str:
        return self._render(task, live=True, final=False)

    def refresh(self, task: Foreign, data: JsonObject | None) -> JsonValue:
        return (data or {}).get("user")

    def render(self, task: Foreign) -> str:
        return self._render(task, live=False, final=True)


CARDS = [TraincardCard]
