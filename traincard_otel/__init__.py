"""traincard-otel: OpenTelemetry-native training observability for Metaflow.

One line, ``traincard_otel.instrument(trainer)`` (or ``autolog()``, or the ``@traincard`` step
decorator alone), turns a training run into OpenTelemetry signals that feed a live Metaflow card
(``@card(type="traincard")``) through the task's datastore and, when ``OTEL_*`` variables ask for
it, an existing OTLP stack. The frameworks' own callback and tracker classes are in
:mod:`traincard_otel.integrations`.
"""

from __future__ import annotations

from ._autolog import autolog
from ._configure import active_reporter, configure
from ._data.rundata import RunData, Series
from ._instrument import instrument
from ._read.run import load
from ._read.sweep import sweep
from ._version import __version__
from ._write.pipeline import shutdown
from ._write.report.items import ItemMeter
from ._write.report.reporter import Phase, Reporter
from .exceptions import ConfigError, MissingDependencyError, TraincardError

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
