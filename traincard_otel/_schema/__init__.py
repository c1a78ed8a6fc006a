"""The wire schema: every record kind that crosses a thread or a file, and every emitted name.

This package is the single source of the names the package emits (event names, attribute keys,
metric instruments, span names, store record keys) and of the typed records that travel from the
training thread to the converter (:class:`MetricsReport`, :class:`StepEnd`, ...). The OTel mapping
(the converter and the store exporters), the store and the card payload all take their names from
here, and ``docs/schema.md`` is generated from it (``python -m traincard_otel._schema >
docs/schema.md``; a test keeps it so).

By role: ``names`` (spans, attribute keys, events), ``metrics`` (instruments), ``records`` (the
typed reports, the status snapshot, the store's record codes), ``anomaly_kinds`` (the anomaly
kinds), ``doc`` (the page).

Training has no OpenTelemetry semantic conventions, so our own names use the ``traincard.``
prefix; host, process and GPU figures use the semconv names.
"""

from __future__ import annotations

from .anomaly_kinds import (
    ANOMALY_KIND_NAMES,
    ANOMALY_KINDS,
    CRITICAL_ANOMALY_KINDS,
    AnomalyKind,
    AnomalyKindSpec,
)
from .doc import render_markdown
from .metrics import (
    ALL_METRICS,
    GPU_PREFIXES,
    GPU_TORCH_MEMORY,
    NOT_STORED_METRICS,
    REPORTED_FRACTIONS,
    SYSTEM_METRICS,
    TRAINING_METRICS,
    InstrumentKind,
    Metric,
    MetricSpec,
    SystemMetric,
)
from .names import GENAI_SEMCONV_VERSION, PHASE_SPAN_PREFIX, RUN_SPAN, Attr, Event, GenAI, event_names
from .records import (
    ANATOMY_PARTS,
    STEP_PARTS,
    CheckpointSaved,
    Failure,
    Heartbeat,
    Hyperparameters,
    LifecycleEvent,
    LogLine,
    LogLines,
    MetricsReport,
    PhaseEnd,
    PhaseStart,
    Report,
    SourcedReport,
    StatusSection,
    StepEnd,
    StoreKind,
    SystemReport,
)

__all__ = [
    "ALL_METRICS",
    "ANATOMY_PARTS",
    "ANOMALY_KINDS",
    "ANOMALY_KIND_NAMES",
    "CRITICAL_ANOMALY_KINDS",
    "GENAI_SEMCONV_VERSION",
    "GPU_PREFIXES",
    "GPU_TORCH_MEMORY",
    "NOT_STORED_METRICS",
    "PHASE_SPAN_PREFIX",
    "REPORTED_FRACTIONS",
    "RUN_SPAN",
    "STEP_PARTS",
    "SYSTEM_METRICS",
    "TRAINING_METRICS",
    "AnomalyKind",
    "AnomalyKindSpec",
    "Attr",
    "CheckpointSaved",
    "Event",
    "Failure",
    "GenAI",
    "Heartbeat",
    "Hyperparameters",
    "InstrumentKind",
    "LifecycleEvent",
    "LogLine",
    "LogLines",
    "Metric",
    "MetricSpec",
    "MetricsReport",
    "PhaseEnd",
    "PhaseStart",
    "Report",
    "SourcedReport",
    "StatusSection",
    "StepEnd",
    "StoreKind",
    "SystemMetric",
    "SystemReport",
    "event_names",
    "render_markdown",
]
