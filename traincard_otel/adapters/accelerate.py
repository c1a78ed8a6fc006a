"""Hugging Face Accelerate: a tracker for ``Accelerator(log_with=[TraincardTracker()])``, so
``accelerator.log(values, step=...)`` reaches the card, and ``instrument(accelerator)``.

Accelerate calls trackers on the main process only (``main_process_only``), like every tracker;
step ends and heartbeats of the other ranks come from the optimizer hooks of
:mod:`traincard_otel.adapters.torch_loop` when a raw loop is also tracked.

``instrument(accelerator)`` also times the anatomy of each step (:mod:`._anatomy`) on every
process: the first model and every optimizer ``accelerator.prepare`` returns (or has prepared
already) get the hooks, and each step end reported (``reporter.step_end``, or a tracked raw loop's)
carries the parts timed since the previous one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from .._insights.flops import model_fields
from .._optional import require
from .._reporter import Reporter
from .._safety import guarded, internal_error
from .._schema import Event
from .._types import Foreign, Reported
from ..exceptions import TraincardError
from ._anatomy import Anatomy, clock_for

accelerate_tracking = require("accelerate.tracking", "accelerate")
MIN_VERSION = (0, 26)


def _check_version() -> None:
    import accelerate

    parts = tuple(int(p) for p in accelerate.__version__.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise TraincardError(
            f"accelerate {accelerate.__version__} is not supported; traincard-otel supports >= 0.26"
        )


# accelerate ships no type information: its tracker base class is Any to mypy.
class TraincardTracker(accelerate_tracking.GeneralTracker):  # type: ignore[name-defined,misc]
    """An Accelerate tracker writing to traincard (configures telemetry on first use)."""

    name = "traincard"
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, reporter: Reporter | None = None, **settings: Reported) -> None:
        super().__init__()
        self._reporter = reporter
        self._settings = settings

    @property
    def reporter(self) -> Reporter:
        if self._reporter is None:
            from .._reporter import configure

            self._reporter = configure(**self._settings)
        return self._reporter

    @property
    def tracker(self) -> Reporter:
        return self.reporter

    @property
    def should_stop(self) -> bool:
        """True once an anomaly that ``stop_on`` names was seen (``Reporter.should_stop``); with
        several processes, combine it across them before leaving the loop (docs/guards.md)."""
        return self.reporter.should_stop

    @guarded("accelerate.store_init_configuration", None)
    def store_init_configuration(self, values: Mapping[str, object]) -> None:
        self.reporter.event(Event.HYPERPARAMS, body={str(k): str(v) for k, v in values.items()})

    @guarded("accelerate.log", None)
    def log(self, values: Mapping[str, Reported], step: int | None = None, **kwargs: object) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, (str, dict, list))}
        if scalars:
            phase = "eval" if any(k.startswith(("eval", "val")) for k in scalars) else "train"
            self.reporter.metrics(scalars, step=step, phase=phase)
        if step is not None:
            self.reporter.progress(step=step)
            self.reporter.heartbeat()

    @guarded("accelerate.finish", None)
    def finish(self) -> None:
        self.reporter.flush()


class AccelerateHandle:
    """Returned by :func:`traincard_otel.instrument` for an ``Accelerator``."""

    def __init__(
        self, accelerator: Foreign, tracker: TraincardTracker, anatomy: Anatomy | None = None
    ) -> None:
        self.accelerator, self.tracker, self.anatomy = accelerator, tracker, anatomy
        self.closed = False  # instrument() attaches afresh once closed
        self._model_watched = False
        self._prepare: Foreign = None
        if anatomy is not None:
            self.watch(*getattr(accelerator, "_models", ()), *getattr(accelerator, "_optimizers", ()))
            self._prepare = prepare = accelerator.prepare

            @functools.wraps(prepare)
            def prepare_and_watch(*args: Foreign, **kwargs: Foreign) -> Foreign:
                prepared = prepare(*args, **kwargs)
                try:
                    self.watch(*(prepared if isinstance(prepared, tuple) else (prepared,)))
                except Exception as exc:
                    internal_error("accelerate.prepare", exc)
                return prepared

            accelerator.prepare = prepare_and_watch

    def watch(self, *objects: Foreign) -> None:
        """Time the first model's forwards and backwards, and every optimizer's steps."""
        anatomy = self.anatomy
        if anatomy is None:
            return
        for obj in objects:
            if callable(getattr(obj, "register_forward_pre_hook", None)) and not self._model_watched:
                anatomy.watch_forward(obj)
                self._model_watched = True
            elif callable(getattr(getattr(obj, "optimizer", obj), "register_step_pre_hook", None)):
                anatomy.watch_optimizer(obj)

    def close(self) -> None:
        """Detach the tracker and the anatomy's hooks, and flush."""
        self.closed = True
        if self.tracker in self.accelerator.trackers:
            self.accelerator.trackers.remove(self.tracker)
        if self.anatomy is not None:
            self.anatomy.remove()
            if vars(self.accelerator).get("prepare") is not None:
                del self.accelerator.prepare
        self.tracker.reporter.flush()


def attach(accelerator: Foreign, reporter: Reporter, model: Foreign = None) -> AccelerateHandle:
    """Add a :class:`TraincardTracker` to ``accelerator`` (on the main process, like Accelerate does).

    ``model`` (else the first model ``accelerator.prepare`` has seen) gives the FLOPs per token
    for MFU, in the accelerator's mixed precision.
    """
    _check_version()
    model = model if model is not None else next(iter(getattr(accelerator, "_models", ())), None)
    if model is not None:
        precision = str(getattr(accelerator, "mixed_precision", "no"))
        reporter.progress(**model_fields(model, precision))
    tracker = TraincardTracker(reporter)
    if accelerator.is_main_process:
        accelerator.trackers.append(tracker)
    reporter.progress(world_size=accelerator.num_processes)
    return AccelerateHandle(accelerator, tracker, clock_for(reporter, model))
