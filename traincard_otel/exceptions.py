"""Exceptions raised by traincard-otel at set-up time (never from the training hot path)."""

from __future__ import annotations

__all__ = ["ConfigError", "MissingDependencyError", "TraincardError"]


class TraincardError(Exception):
    """Base class of every error this package raises."""


class ConfigError(TraincardError, ValueError):
    """A setting (argument or environment variable) has a value that cannot be used."""


class MissingDependencyError(TraincardError, ImportError):
    """An optional framework or extra is needed for what was asked and is not installed."""
