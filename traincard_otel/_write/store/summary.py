"""The task's summary (:mod:`traincard_otel._analysis.summary`), written beside its telemetry as
``summary.json`` (one whole-object write; readers: :mod:`traincard_otel._read.load.summaries`)."""

from __future__ import annotations

import json

from ..._store.backends import Backend
from ..._store.layout import SUMMARY_NAME
from ..._types import JsonObject


def write_summary(backend: Backend, summary: JsonObject) -> None:
    """Replace the task's ``summary.json`` (one whole-object write)."""
    backend.write(SUMMARY_NAME, json.dumps(summary, allow_nan=False, default=str).encode())
