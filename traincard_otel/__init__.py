"""traincard-otel: OpenTelemetry-native training observability for Metaflow.

One line, ``traincard_otel.instrument(trainer)``, turns a training run into OpenTelemetry
signals that feed a live Metaflow card (``@card(type="traincard")``) through the task's
datastore and, when ``OTEL_*`` variables ask for it, an existing OTLP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _run
from ._data.rundata import RunData, Series
from ._load import load
from ._version import __version__
from .exceptions import ConfigError, MissingDependencyError, TraincardError

if TYPE_CHECKING:
    from ._insights.items import ItemMeter
    from ._instrument import instrument
    from ._pipeline import shutdown
    from ._reporter import Phase, Reporter, active_reporter, configure
    from ._sweep import sweep

# What reports (the pipeline, the OTel SDK) is imported when first named: reading a run
# (``load()``, ``traincard render``) never pays for it.
_LAZY = {
    "ItemMeter": "._insights.items",
    "instrument": "._instrument",
    "shutdown": "._pipeline",
    "Phase": "._reporter",
    "Reporter": "._reporter",
    "active_reporter": "._reporter",
    "configure": "._reporter",
    "sweep": "._sweep",
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
    "configure",
    "instrument",
    "load",
    "shutdown",
    "sweep",
]
