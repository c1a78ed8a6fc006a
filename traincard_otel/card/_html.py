"""Assemble the card: one self-contained HTML document (CSS, chart library, JS and data inline)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

_RELOAD_TOKEN = 'var METAFLOW_RELOAD_TOKEN = "[METAFLOW_RELOAD_TOKEN]";'


@functools.cache
def _asset(name: str) -> str:
    return (files("traincard_otel.card") / "assets" / name).read_text(encoding="utf-8")


def embed_json(payload: Mapping[str, Any]) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``</script>``, comment or line-separator tricks."""
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False, default=str)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def assemble_html(payload: Mapping[str, Any], *, live: bool) -> str:
    """The card page for ``payload`` (see ``docs/card-payload.md``).

    With ``live``, the page defines ``window.metaflow_card_update`` and the reload-token
    placeholder that Metaflow substitutes, so it can be updated in place while the step runs.
    """
    token = f"<script>{_RELOAD_TOKEN}</script>" if live else ""
    title = str((payload.get("run") or {}).get("title") or "training")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>traincard · {_escape(title)}</title>"
        f"<style>{_asset('vendor/uPlot.min.css')}\n{_asset('card.css')}</style></head>"
        f"<body data-live='{'1' if live else '0'}' data-updates='0'><div id='tc-root'></div>"
        f'<script type="application/json" id="tc-payload">{embed_json(payload)}</script>'
        f"{token}<script>{_asset('vendor/uPlot.iife.min.js')}</script>"
        f"<script>{_asset('card.js')}</script>"
        + (f"<script>{_asset('live.js')}</script>" if live else "")
        + "</body></html>"
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
