"""The genai settings: read from the environment or configure(), prices checked at start."""

from __future__ import annotations

import pytest

from traincard_otel._config import parse_prices, resolve
from traincard_otel.exceptions import ConfigError


def test_genai_is_off_by_default_and_on_by_variable_or_argument() -> None:
    assert resolve({}, {}).genai is False
    assert resolve({}, {"TRAINCARD_GENAI": "true"}).genai is True
    assert resolve({"genai": True}, {"TRAINCARD_GENAI": "false"}).genai is True


def test_prices_are_parsed_and_a_bad_one_fails_at_start() -> None:
    assert parse_prices("gpt-4o=2.5:10, *=1:4") == {"gpt-4o": (2.5, 10.0), "*": (1.0, 4.0)}
    assert resolve({}, {"TRAINCARD_GENAI_PRICES": "a=1:2"}).genai_prices == "a=1:2"
    for bad in ("gpt-4o=2.5", "gpt-4o", "=1:2", "m=x:1", "m=-1:2"):
        with pytest.raises(ConfigError, match="model=input:output"):
            resolve({}, {"TRAINCARD_GENAI_PRICES": bad})
        with pytest.raises(ConfigError, match="genai_prices="):
            resolve({"genai_prices": bad}, {})
