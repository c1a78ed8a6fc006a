"""Unencodable text (lone surrogates, control characters) in a store: `traincard render` and the
live payload still work, and nothing half-written is ever left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from traincard_otel import load
from traincard_otel._cli import write_card
from traincard_otel._read.card.render import render_data
from traincard_otel._read.payload import build_payload

from tests.support.runs import write_hostile_store


def test_traincard_render_writes_a_whole_card_from_unencodable_text(tmp_path: Path) -> None:
    store = tmp_path / "store"
    write_hostile_store(store)
    out = tmp_path / "card.html"
    proc = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "render", str(store), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    page = out.read_bytes().decode("utf-8")  # strict: every byte is valid UTF-8
    assert "<script>document.body" not in page  # only as escaped JSON text
    assert "log bad \ufffd" in page
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_live_payload_from_unencodable_text_encodes_anywhere(tmp_path: Path) -> None:
    write_hostile_store(tmp_path)
    payload = build_payload(load(tmp_path), live=True)
    text = json.dumps(payload, ensure_ascii=False)
    text.encode("utf-8")
    assert "\ufffd" in text and "\ud800" not in text
    assert any(line["message"].startswith("log bad \ufffd") for line in payload["logs"])


def test_a_failed_write_leaves_the_earlier_card_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "card.html"
    write_card(out, "<p>earlier card</p>")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_card(out, render_data(load(tmp_path), live=False, final=True))
    assert out.read_text(encoding="utf-8") == "<p>earlier card</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.html"]
