"""docs/configuration.md documents every setting's variable, so the page cannot fall behind."""

from __future__ import annotations

from helpers import REPO

from traincard_otel import environment_variables


def test_every_traincard_variable_has_a_row_in_the_configuration_page() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    names = [v for k, v in vars(environment_variables).items() if k.startswith("TRAINCARD_")]
    assert len(names) >= 15
    missing = [n for n in names if f"`{n}`" not in page]
    assert missing == [], f"add a row for {missing} to docs/configuration.md"
