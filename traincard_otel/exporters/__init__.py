"""OpenTelemetry exporters of traincard-otel.

The store exporters are registered as the ``traincard`` entry point of the OTel exporter groups,
so ``OTEL_TRACES_EXPORTER=traincard`` (and metrics, logs) works under ``opentelemetry-instrument``.
"""

from __future__ import annotations

from .._write.export.store import TraincardLogExporter, TraincardMetricExporter, TraincardSpanExporter

__all__ = ["TraincardLogExporter", "TraincardMetricExporter", "TraincardSpanExporter"]
