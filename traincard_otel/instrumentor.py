"""The OpenTelemetry instrumentor: ``opentelemetry-instrument python train.py`` reports every
Trainer, Lightning Trainer and Accelerator of a script that never mentions this package.

Registered under the ``opentelemetry_instrumentor`` entry point group as ``traincard`` (so
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=traincard`` turns it off); it needs the ``instrument``
extra, which brings OpenTelemetry's instrumentation runner. Instrumenting is
:func:`traincard_otel.autolog`: the store and the card are written as always, and the
``OTEL_*`` settings decide where else the signals go.
"""

from __future__ import annotations

from collections.abc import Collection

from ._autolog import autolog
from ._optional import require
from ._safety import report_internal_error

__all__ = ["TraincardInstrumentor"]

_instrumentor = require("opentelemetry.instrumentation.instrumentor", "instrument")


# BaseInstrumentor is a singleton: instrument() runs _instrument once until uninstrument().
class TraincardInstrumentor(_instrumentor.BaseInstrumentor):  # type: ignore[misc,name-defined]
    """Calls :func:`traincard_otel.autolog` when instrumenting, and undoes it when uninstrumenting."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # each framework is hooked if and when it is imported

    def _instrument(self, **kwargs: object) -> None:
        try:
            autolog()
        except Exception as exc:  # the runner stops loading the other instrumentors on an exception
            report_internal_error("the OpenTelemetry instrumentor", exc)

    def _uninstrument(self, **kwargs: object) -> None:
        autolog(disable=True)
