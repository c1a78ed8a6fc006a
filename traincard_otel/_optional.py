"""Lazy imports of optional dependencies, with an install hint when one is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from .exceptions import MissingDependencyError


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module!r} is needed for this; install it with: pip install 'traincard-otel[{extra}]'"
        ) from exc
