"""Exporters selected by the standard ``OTEL_{TRACES,METRICS,LOGS}_EXPORTER`` variables.

Names resolve like the OTel SDK configurator does: through the ``opentelemetry_*_exporter``
entry-point groups, with ``otlp`` mapped to the gRPC or HTTP/protobuf exporter according to
``OTEL_EXPORTER_OTLP[_<SIGNAL>]_PROTOCOL`` (default ``http/protobuf``, the specification's
default). ``traincard`` names the store exporter, which is on anyway.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points

from ..._types import Foreign
from ...exceptions import ConfigError, MissingDependencyError

_GROUPS = {
    "traces": "opentelemetry_traces_exporter",
    "metrics": "opentelemetry_metrics_exporter",
    "logs": "opentelemetry_logs_exporter",
}


def _protocol(signal: str) -> str:
    raw = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    proto = raw.strip().lower()
    if proto not in {"grpc", "http/protobuf"}:
        raise ConfigError(
            f"OTLP protocol {raw!r} is not supported; "
            "set OTEL_EXPORTER_OTLP_PROTOCOL to grpc or http/protobuf"
        )
    return proto


def exporter_classes(signal: str, names: tuple[str, ...]) -> list[Foreign]:
    """Classes for the exporter ``names`` of ``signal`` (traces, metrics, logs), store excluded: the
    span, log or metric exporter (or metric reader) classes other packages register by name."""
    group = entry_points(group=_GROUPS[signal])
    out = []
    for name in names:
        if name == "traincard":
            continue
        key = name
        if name == "otlp":
            key = "otlp_proto_grpc" if _protocol(signal) == "grpc" else "otlp_proto_http"
        matches = [ep for ep in group if ep.name == key]
        if not matches:
            known = sorted({ep.name for ep in group} | {"otlp", "none"})
            hint = " (pip install 'traincard-otel[otlp]')" if key.startswith("otlp") else ""
            raise ConfigError(
                f"OTEL_{signal.upper()}_EXPORTER names {name!r}, which is not installed{hint}; known: {known}"
            )
        try:
            out.append(matches[0].load())
        except ImportError as exc:
            raise MissingDependencyError(f"exporter {name!r} failed to import: {exc}") from exc
    return out
