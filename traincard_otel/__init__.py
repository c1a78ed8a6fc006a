"""traincard-otel: OpenTelemetry-native training observability for Metaflow.

One line, ``traincard_otel.instrument(trainer)`` (or ``autolog()``, or the ``@traincard`` step
decorator alone), turns a training run into OpenTelemetry signals that feed a live Metaflow card
(``@card(type="traincard")``) through the task's datastore and, when ``OTEL_*`` variables ask for
it, an existing OTLP stack. The frameworks' own callback and tracker classes are in
:mod:`traincard_otel.integrations`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._data.rundata import RunData, Series
from ._read.run import load
from ._version import __version__
from .exceptions import ConfigError, MissingDependencyError, TraincardError

if TYPE_CHECKING:
    from ._autolog import autolog
    from ._configure import active_reporter, configure
    from ._instrument import instrument
    from ._read.sweep import sweep
    from ._write.pipeline import shutdown
    from ._write.report.items import ItemMeter
    from ._write.report.reporter import Phase, Reporter

# What reports (the pipeline, the OTel SDK) is imported when first named: reading a run
# (``load()``, ``traincard render``) never pays for it.
_LAZY = {
    "autolog": "._autolog",
    "active_reporter": "._configure",
    "configure": "._configure",
    "instrument": "._instrument",
    "sweep": "._read.sweep",
    "shutdown": "._write.pipeline",
    "ItemMeter": "._write.report.items",
    "Phase": "._write.report.reporter",
    "Reporter": "._write.report.reporter",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ConfigError",
    "ItemMeter",
    "MissingDependencyError",
    "Phase",
    "Reporter",
    "RunData",
    "Series",
    "TraincardError",
    "__version__",
    "active_reporter",
    "autolog",
    "configure",
    "instrument",
    "load",
    "shutdown",
    "sweep",
]
