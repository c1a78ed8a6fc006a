"""assemble_html: one self-contained page, payload embedded safely, live and final variants."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.resources import files
from typing import Any

import pytest

from traincard_otel._read.card import page as _html
from traincard_otel._read.card.page import assemble_html, embed_json

HOSTILE = "</script><script>alert(1)</script><!--<script>"
TOKEN_LINE = 'var METAFLOW_RELOAD_TOKEN = "[METAFLOW_RELOAD_TOKEN]";'


def _payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "v": 1,
        "final": False,
        "live": False,
        "generated_at": 1763800000.0,
        "run": {"title": "Flow/1/train/2", "status": "running", "phase": "train", "step": 3, "max_steps": 10},
        "banners": [{"kind": "info", "text": "hello"}],
        "charts": [
            {
                "id": "loss",
                "title": "loss",
                "group": "training",
                "unit": "",
                "x": "step",
                "series": [{"label": "train", "x": [1, 2, 3], "y": [2.0, 1.5, 1.2]}],
            }
        ],
        "markers": [],
        "checkpoints": [],
        "logs": [{"time": 1763800000.0, "level": "INFO", "rank": 0, "message": HOSTILE, "traceback": None}],
        "failure": None,
        "system": {"notes": [], "latest": []},
        "stats": {"dropped": {}, "corrupt_segments": 0, "segments": 1, "points": 3},
    }
    payload.update(overrides)
    return payload


def _embedded(page: str) -> str:
    match = re.search(r'<script type="application/json" id="tc-payload">(.*?)</script>', page, re.S)
    assert match, "payload element missing"
    return match.group(1)


@pytest.mark.parametrize("live", [False, True])
def test_page_is_self_contained(live: bool) -> None:
    page = assemble_html(_payload(), live=live)
    assert page.startswith("<!doctype html>")
    assert "<link" not in page.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(?:https?:)?//", page, re.I)
    assert not re.search(r"<script[^>]*\ssrc\s*=", page, re.I)
    # uPlot and the card code are inline.
    assert "uPlot" in page and "tc-root" in page and ".u-legend" in page and "--tc-bg" in page


@pytest.mark.parametrize("live", [False, True])
def test_payload_cannot_close_its_script_element(live: bool) -> None:
    payload = _payload()
    payload["run"]["title"] = HOSTILE
    payload["banners"].append({"kind": "info", "text": "a & b > c \u2028 line \u2029 para"})
    page = assemble_html(payload, live=live)
    embedded = _embedded(page)
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert "\u2028" not in embedded and "\u2029" not in embedded
    assert "\\u003c/script\\u003e" in embedded
    assert json.loads(embedded) == payload  # the escapes are plain JSON
    # Every <script> element opened by the page is closed by its own </script>.
    assert page.count("<script") == page.count("</script>") == (5 if live else 3)
    assert "<title>&lt;/script&gt;" in page


def test_embed_json_handles_non_finite_and_foreign_numbers() -> None:
    class Scalar:
        def item(self) -> float:
            return 2.5

    text = embed_json({"a": float("nan"), "b": [float("inf"), 1.0], "c": Scalar(), "d": {3}})
    assert json.loads(text) == {"a": None, "b": [None, 1.0], "c": 2.5, "d": [3]}


def test_live_and_final_pages_differ_only_where_they_must() -> None:
    live = assemble_html(_payload(), live=True)
    final = assemble_html(_payload(final=True), live=False)
    assert TOKEN_LINE in live and "[METAFLOW_RELOAD_TOKEN]" in live
    assert re.search(r"window\.metaflow_card_update\s*=\s*function", live)
    assert "METAFLOW_RELOAD_TOKEN" not in final
    assert "metaflow_card_update" not in final
    assert 'data-live="1"' in live and 'data-live="0"' in final
    assert 'data-updates="0"' in live


def test_assets_are_read_once() -> None:
    _html._asset.cache_clear()
    _html.card_script.cache_clear()
    assemble_html(_payload(), live=True)
    assemble_html(_payload(), live=False)
    info = _html._asset.cache_info()
    # 2 css + uPlot + the card's section scripts + live.js
    assert info.misses == 4 + len(_html.CARD_SCRIPTS) and info.hits >= 3
    assert _html.card_script.cache_info().misses == 1


def test_card_script_is_one_file_per_section_each_small() -> None:
    """Every file under assets/card/ is in the script, in one function scope, and none is long."""
    folder = files("traincard_otel._read.card") / "assets" / "card"
    on_disk = sorted(p.name for p in folder.iterdir() if p.name.endswith(".js"))
    assert on_disk == sorted(f"{name}.js" for name in _html.CARD_SCRIPTS)
    for name in on_disk:
        assert len((folder / name).read_text(encoding="utf-8").splitlines()) <= 600, name
    js = _html.card_script()
    assert js.startswith("(function () {") and js.rstrip().endswith("})();")
    assert js.index("function readNames") < js.index("function renderHeader") < js.index("function init")


def test_card_js_only_inserts_text() -> None:
    js = _html.card_script()
    for risky in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert risky not in js, risky
    assert "fetch(" not in js and "XMLHttpRequest" not in js  # no network access
    assert "</script" not in js.lower()


def test_module_does_not_import_metaflow() -> None:
    code = (
        "import sys; import traincard_otel._read.card.page as h; "
        "h.assemble_html({'run': {}}, live=True); "
        "print([m for m in sys.modules if m == 'metaflow' or m.startswith('metaflow.')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_minimal_payload_still_assembles() -> None:
    page = assemble_html({}, live=False)
    assert json.loads(_embedded(page)) == {}
    assert "<title>training run" in page
