"""Helpers for browser tests: open an HTML string, save a screenshot for review."""

from __future__ import annotations

from pathlib import Path

from tests.support.helpers import REPO

SCREENSHOTS = REPO / "test-artifacts" / "screenshots"


def open_html(driver: object, html: str, tmp_path: Path, name: str = "card.html") -> None:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    driver.get(path.as_uri())  # type: ignore[attr-defined]


def screenshot(driver: object, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    return path
