"""Assemble the card page: one self-contained HTML document (CSS, chart library, JS and data inline)."""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Mapping
from importlib.resources import files

from ..._text import encodable

# Metaflow replaces the bracketed placeholder with the reload token of the card it serves.
RELOAD_TOKEN_JS = 'var METAFLOW_RELOAD_TOKEN = "[METAFLOW_RELOAD_TOKEN]";'

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
#: The card's script: one file per section under ``assets/card/``, concatenated in this order inside
#: one function scope (no build step). ``core`` (wire names, state, helpers) comes first and
#: ``page`` (skeleton, live update, start) last; the rest only define functions.
CARD_SCRIPTS = (
    "core",
    "header",
    "banners",
    "failure",
    "gang",
    "anatomy",
    "profiles",
    "charts",
    "summary",
    "system",
    "checkpoints",
    "logs",
    "completions",
    "agents",
    "stats",
    "insights",
    "baseline",
    "sweep",
    "page",
)


@functools.cache
def _asset(name: str) -> str:
    """One file under ``assets/``, read once per process."""
    text = (files("traincard_otel._read.card") / "assets" / name).read_text(encoding="utf-8")
    if name.endswith(".js"):
        # An inline script ends at the first "</script"; JS treats "<\/" inside strings the same as "</".
        text = text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")
    elif name.endswith(".css"):
        text = text.replace("</style", "<\\/style")
    return text


@functools.cache
def card_script() -> str:
    """The card's script: the section files of :data:`CARD_SCRIPTS` in one function scope."""
    body = "\n".join(_asset(f"card/{name}.js") for name in CARD_SCRIPTS)
    return '(function () {\n  "use strict";\n\n' + body + "})();\n"


def _jsonable(value: object) -> object:
    """A copy of ``value`` with NaN and infinities as null (``JSON.parse`` rejects them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _default(value: object) -> object:
    """Numbers from numpy and friends become plain numbers; anything else becomes its string."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            out = item()
        except (TypeError, ValueError):
            out = None
        if isinstance(out, bool | int | float | str) or out is None:
            return out
    if isinstance(value, set | frozenset):
        return list(value)
    return str(value)


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default)


def embed_json(payload: object) -> str:
    """JSON text that is safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e`` and ``\\u0026`` (so no ``</script>`` or
    ``<!--`` can end or change the element), and U+2028/U+2029 are escaped as well. Lone surrogate
    code points become U+FFFD (the page would show that glyph anyway), so the text always encodes
    as UTF-8.
    """
    try:
        text = _dumps(payload)
    except ValueError:  # NaN or infinity somewhere
        text = _dumps(_jsonable(payload))
    text = encodable(text)
    # str.replace per character, not str.translate: translate has a fast path only for ASCII text,
    # and one non-ASCII character anywhere (a banner icon, a user's label) makes it ~10x slower.
    for char, escape in _JSON_ESCAPES.items():
        if char in text:
            text = text.replace(char, escape)
    return text


def assemble_html(payload: Mapping[str, object], *, live: bool) -> str:
    """Return the card page for ``payload`` (``docs/card-payload.md``) as one self-contained HTML string.

    The page inlines the uPlot and card styles, the payload (as ``<script type="application/json"
    id="tc-payload">``), uPlot and the card's script (:func:`card_script`); it loads nothing from the network.

    With ``live=True`` (``render_runtime``) the page also carries
    ``var METAFLOW_RELOAD_TOKEN = "[METAFLOW_RELOAD_TOKEN]";`` for Metaflow to substitute and defines
    ``window.metaflow_card_update(payload)``, which merges live payloads into what is drawn. With
    ``live=False`` (the final static card) neither appears, so viewers stop polling.
    """
    run = payload.get("run")
    title = encodable(str(run.get("title") or "")) if isinstance(run, Mapping) else ""
    live_scripts = (
        f"<script>{RELOAD_TOKEN_JS}</script>\n<script>{_asset('live.js')}</script>\n" if live else ""
    )
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        f"<title>{html.escape(title or 'training run')} \u00b7 traincard</title>\n"
        f"<style>\n{_asset('vendor/uPlot.min.css')}\n</style>\n"
        f"<style>\n{_asset('card.css')}\n</style>\n"
        "</head>\n"
        f'<body class="tc" data-live="{"1" if live else "0"}" data-updates="0">\n'
        '<div id="tc-root"></div>\n'
        "<noscript>This card needs JavaScript to draw its charts.</noscript>\n"
        f'<script type="application/json" id="tc-payload">{embed_json(payload)}</script>\n'
        f"<script>{_asset('vendor/uPlot.iife.min.js')}</script>\n"
        f"<script>{card_script()}</script>\n"
        f"{live_scripts}"
        "</body>\n</html>\n"
    )
