"""Hugging Face Accelerate: :class:`AccelerateTracker`, for ``Accelerator(log_with=[AccelerateTracker()])``,
so ``accelerator.log(values, step=...)`` reaches the card; ``instrument(accelerator)`` wires the same
tracker (adopting one passed in ``log_with``).

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
from collections.abc import Callable, Mapping

from .._analysis.flops import model_fields
from .._configure import configure
from .._optional import require
from .._safety import guarded, internal_error
from .._schema import Event
from .._types import Foreign, Reported
from .._write.report.reporter import Reporter
from ..exceptions import TraincardError
from ._anatomy import Anatomy, clock_for
from ._registry import calling_object, checked_settings, claim, framework_roots

accelerate_tracking = require("accelerate.tracking", "accelerate")
MIN_VERSION = (0, 26)


def _check_version() -> None:
    import accelerate

    parts = tuple(int(p) for p in accelerate.__version__.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise TraincardError(
            f"accelerate {accelerate.__version__} is not supported; traincard-otel supports >= 0.26"
        )


def _holds(tracker: object) -> Callable[[object], bool]:
    return lambda obj: "accelerate" in framework_roots(obj) and tracker in getattr(obj, "trackers", ())


# accelerate ships no type information: its tracker base class is Any to mypy.
class AccelerateTracker(accelerate_tracking.GeneralTracker):  # type: ignore[name-defined,misc]
    """An Accelerate tracker reporting to the card and OTel: ``accelerator.log(...)``'s values, the
    run's configuration, and the model's FLOPs per token (the model given to ``instrument``, else
    the first one ``accelerator.prepare`` has seen).

    Passed in ``log_with``, it binds to its Accelerator when ``init_trackers`` starts it (or at its
    first call); ``instrument(accelerator)`` wires this same tracker.

    Args:
        **settings: passed to :func:`traincard_otel.configure` when it binds.
    """

    name = "traincard"
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, **settings: Reported) -> None:
        super().__init__()
        self.settings = checked_settings(settings)
        self.accelerator: Foreign = None  # the Accelerator reported, once bound
        self._reporter: Reporter | None = None
        self._model: Foreign = None
        self._model_reported = False
        self._inert = False  # a second tracker of ours on one Accelerator: the first reports

    def bind(self, accelerator: Foreign, reporter: Reporter, model: Foreign = None) -> None:
        """Report ``accelerator``'s run to ``reporter`` (see :func:`attach`)."""
        self.accelerator, self._reporter = accelerator, reporter
        reporter.progress(world_size=accelerator.num_processes)
        self.use_model(model)

    def use_model(self, model: Foreign) -> None:
        """Report the FLOPs per token of ``model`` (None: the first model the Accelerator prepared,
        once it has one), in the Accelerator's mixed precision."""
        if model is not None:
            self._model, self._model_reported = model, False
        model = self._model
        if model is None and self.accelerator is not None:
            model = next(iter(getattr(self.accelerator, "_models", ())), None)
        if model is not None and not self._model_reported:
            self._model_reported = True
            precision = str(getattr(self.accelerator, "mixed_precision", "no"))
            self.reporter.progress(**model_fields(model, precision))

    @property
    def reporter(self) -> Reporter:
        if self._reporter is None:
            accelerator = calling_object(_holds(self), skip=self)
            if accelerator is not None:
                handle = claim(accelerator, lambda: attach(accelerator, {}, tracker=self))
                self._inert = getattr(handle, "tracker", None) is not self
            if self._reporter is None:  # no Accelerator found, or another tracker reports it
                self._reporter = configure(**self.settings)
        return self._reporter

    @property
    def tracker(self) -> Reporter:
        return self.reporter

    @property
    def should_stop(self) -> bool:
        """True once an anomaly that ``stop_on`` names was seen (``Reporter.should_stop``); with
        several processes, combine it across them before leaving the loop (docs/guards.md)."""
        return self.reporter.should_stop

    @guarded("accelerate.start", None, passes=(TraincardError,))  # a bad setting stops init_trackers
    def start(self) -> None:
        self.reporter  # noqa: B018  (binds to the Accelerator whose init_trackers calls this)

    @guarded("accelerate.store_init_configuration", None)
    def store_init_configuration(self, values: Mapping[str, object]) -> None:
        reporter = self.reporter
        if not self._inert:
            reporter.event(Event.HYPERPARAMS, body={str(k): str(v) for k, v in values.items()})

    @guarded("accelerate.log", None)
    def log(self, values: Mapping[str, Reported], step: int | None = None, **kwargs: object) -> None:
        reporter = self.reporter
        if self._inert:
            return
        if not self._model_reported:
            self.use_model(None)
        scalars = {k: v for k, v in values.items() if not isinstance(v, (str, dict, list))}
        if scalars:
            phase = "eval" if any(k.startswith(("eval", "val")) for k in scalars) else "train"
            reporter.metrics(scalars, step=step, phase=phase)
        if step is not None:
            reporter.progress(step=step)
            reporter.heartbeat()

    @guarded("accelerate.finish", None)
    def finish(self) -> None:
        self.reporter.flush()


class AccelerateHandle:
    """Returned by :func:`traincard_otel.instrument` for an ``Accelerator``."""

    def __init__(
        self, accelerator: Foreign, tracker: AccelerateTracker, anatomy: Anatomy | None = None
    ) -> None:
        self.accelerator, self.tracker, self.anatomy = accelerator, tracker, anatomy
        self.closed = False  # instrument() attaches afresh once closed
        self._model_watched = False
        if anatomy is not None:
            self.watch(*getattr(accelerator, "_models", ()), *getattr(accelerator, "_optimizers", ()))
            prepare = accelerator.prepare

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
                anatomy.bracket_backward(self.accelerator)
                self._model_watched = True
            elif callable(getattr(getattr(obj, "optimizer", obj), "register_step_pre_hook", None)):
                anatomy.watch_optimizer(obj)

    def use_model(self, model: Foreign) -> None:
        """Report the FLOPs per token of ``model`` (given to a later ``instrument`` call)."""
        self.tracker.use_model(model)

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


def attach(
    accelerator: Foreign,
    settings: Mapping[str, Reported],
    model: Foreign = None,
    tracker: AccelerateTracker | None = None,
) -> AccelerateHandle:
    """Bind ``tracker`` (else an unbound one passed in ``log_with``, else a new one) to
    ``accelerator``, reporting to :func:`configure` with ``settings`` and the tracker's own, and
    add it to ``accelerator.trackers`` on the main process, like Accelerate does; it leaves
    ``log_with``, where ``init_trackers`` would add it a second time.

    ``model`` (else the first model ``accelerator.prepare`` has seen, once it has one) gives the
    FLOPs per token for MFU, in the accelerator's mixed precision.
    """
    _check_version()
    log_with = list(getattr(accelerator, "log_with", None) or ())
    if tracker is None:
        passed = (t for t in (*accelerator.trackers, *log_with) if isinstance(t, AccelerateTracker))
        tracker = next((t for t in passed if t.accelerator is None), None)
    tracker = tracker if tracker is not None else AccelerateTracker()
    accelerator.log_with = [t for t in log_with if not isinstance(t, AccelerateTracker)]
    # A new list: init_trackers may be iterating over the old one (it starts each tracker).
    trackers = [t for t in accelerator.trackers if not isinstance(t, AccelerateTracker) or t is tracker]
    if accelerator.is_main_process and tracker not in trackers:
        trackers.append(tracker)
    accelerator.trackers = trackers
    reporter = configure(**{**settings, **tracker.settings})
    tracker.bind(accelerator, reporter, model)
    first = model if model is not None else next(iter(getattr(accelerator, "_models", ())), None)
    return AccelerateHandle(accelerator, tracker, clock_for(reporter, first))
