"""traincard-otel: OpenTelemetry-native training observability for Metaflow.

One line, ``traincard_otel.instrument(trainer)`` (or ``autolog()``, or the ``@traincard`` step
decorator alone), turns a training run into OpenTelemetry signals that feed a live Metaflow card
(``@card(type="traincard")``) through the task's datastore and, when ``OTEL_*`` variables ask for
it, an existing OTLP stack. The frameworks' own callback and tracker classes are in
:mod:`traincard_otel.integrations`.
"""

from __future__ import annotations

from . import _run
from ._autolog import autolog
from ._data.rundata import RunData, Series
from ._insights.items import ItemMeter
from ._instrument import instrument
from ._load import load
from ._pipeline import shutdown
from ._reporter import Phase, Reporter, active_reporter, configure
from ._sweep import sweep
from ._version import __version__
from .exceptions import ConfigError, MissingDependencyError, TraincardError


def _card_html(data: _run.LoadedRun) -> str:
    from ._card.render import render_data

    return render_data(data, live=False, final=True)


_run.html_renderer = _card_html

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
