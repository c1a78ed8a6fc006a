"""The frameworks' own ways to add a tracker, for code that already passes callbacks or trackers:

    Trainer(..., callbacks=[HFCallback()])             # transformers, and TRL's trainers
    pl.Trainer(..., callbacks=[LightningCallback()])   # lightning.pytorch or pytorch_lightning
    Accelerator(log_with=[AccelerateTracker()])        # then accelerator.init_trackers(...)

Each class is the adapter that :func:`traincard_otel.instrument` wires for its framework, not a
second one: combined with ``instrument()``, ``autolog()`` or ``@traincard`` on the same object,
everything is reported once. Each takes the settings of :func:`traincard_otel.configure` as
keyword arguments. Importing this module imports no framework; a class is built on first use,
and naming one whose framework is missing raises :class:`~traincard_otel.MissingDependencyError`
with the extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["AccelerateTracker", "HFCallback", "LightningCallback"]

if TYPE_CHECKING:
    from .adapters.accelerate import AccelerateTracker
    from .adapters.huggingface import HFCallback

    LightningCallback: type


def __getattr__(name: str) -> type:
    if name == "HFCallback":
        from .adapters.huggingface import HFCallback

        return HFCallback
    if name == "LightningCallback":
        from .adapters.lightning import callback_class, lightning_package

        return callback_class(lightning_package())
    if name == "AccelerateTracker":
        from .adapters.accelerate import AccelerateTracker

        return AccelerateTracker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
