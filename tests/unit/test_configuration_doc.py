"""docs/configuration.md documents every setting's variable, so the page cannot fall behind."""

from __future__ import annotations

import dataclasses
import inspect

import traincard_otel
from traincard_otel import environment_variables
from traincard_otel._config import Settings

from tests.support.helpers import REPO


def test_every_traincard_variable_has_a_row_in_the_configuration_page() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    names = [v for k, v in vars(environment_variables).items() if k.startswith("TRAINCARD_")]
    assert len(names) >= 15
    missing = [n for n in names if f"`{n}`" not in page]
    assert missing == [], f"add a row for {missing} to docs/configuration.md"


def test_every_configure_argument_is_a_setting_with_a_row_in_the_configuration_page() -> None:
    """configure() takes each setting as a typed keyword-only argument, and the page names it."""
    page = (REPO / "docs" / "configuration.md").read_text()
    params = inspect.signature(traincard_otel.configure).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None for p in params)
    names = [p.name for p in params]
    assert set(names) <= {f.name for f in dataclasses.fields(Settings)}
    assert len(names) >= 15
    missing = [n for n in names if f"`{n}=`" not in page]
    assert missing == [], f"name {missing} in docs/configuration.md's argument column"
