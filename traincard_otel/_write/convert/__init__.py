"""The converter: typed reports from the training thread -> OpenTelemetry signals."""

from __future__ import annotations

from .converter import Converter

__all__ = ["Converter"]
