"""Lightning adapter, for both ``lightning.pytorch`` and ``pytorch_lightning`` (never mixed).

``instrument(trainer)`` reports phases, step ends with their samples, tokens and data wait,
progress, the model's FLOPs per token, checkpoints written by ``ModelCheckpoint`` with their
monitor value and best, exceptions, hyperparameters, and every value ``self.log(...)`` logs, with
no second logging call. It costs the training thread a few µs a step:

* The step ends come from the LightningModule's own ``on_train_batch_start`` and
  ``on_train_batch_end``, wrapped on the instance for the length of a fit. Lightning calls those
  once a step whatever they do; a registered Callback's batch hooks cost about 7 µs each a step
  in Lightning's dispatch (a profiler context and a formatted name per callback and hook) before
  any of its own code runs.
* The logged values are taken from the trainer's logger connector (its ``log_metrics``, wrapped
  on the instance), as tensors, before Lightning decides whether any logger wants them: being a
  Lightning Logger made Lightning turn every logged tensor into a float on the training thread
  (about 17 µs a step). A training step's dict is queued as it is (one deque append) and read
  by a metric source on the reporter's background thread, which makes the tensors floats (a
  CUDA tensor waits for its value there); an evaluation's is reported at once, inside its phase.
* A Callback remains for what happens once a fit, an epoch, an evaluation or a save (phases,
  progress, checkpoints, exceptions); Lightning skips a hook attribute that is not callable, so
  its per-step hooks are switched off.

The Callback class is built against the package the trainer itself comes from: mixing the two
namespaces breaks Lightning.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..._types import Foreign
from ..._write.report.reporter import Reporter
from ...exceptions import MissingDependencyError, TraincardError
from .batches import batch_reader, flops_model, precision_dtype
from .callback import callback_class
from .steps import CONNECTOR_METHOD, MODULE_HOOKS, StepTaps, step_progress

__all__ = [
    "CONNECTOR_METHOD",
    "MODULE_HOOKS",
    "LightningHandle",
    "StepTaps",
    "attach",
    "batch_reader",
    "flops_model",
    "precision_dtype",
    "step_progress",
]

MIN_VERSION = (2, 0)


def _package(trainer: Foreign) -> ModuleType:
    root = type(trainer).__module__.split(".", 1)[0]
    name = "lightning.pytorch" if root == "lightning" else "pytorch_lightning"
    try:
        pl = importlib.import_module(name)
    except ImportError as exc:
        raise MissingDependencyError("pip install 'traincard-otel[lightning]'") from exc
    parts = tuple(int(p) for p in pl.__version__.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise TraincardError(f"{name} {pl.__version__} is not supported; traincard-otel supports >= 2.0")
    return pl


class LightningHandle:
    """Returned by :func:`traincard_otel.instrument` for a Lightning Trainer."""

    def __init__(self, trainer: Foreign, callback: Foreign, taps: StepTaps) -> None:
        self.trainer, self.callback, self.taps = trainer, callback, taps
        self.closed = False  # instrument() attaches afresh once closed

    def close(self) -> None:
        """Detach from the Trainer (its own methods and the module's back in place) and flush."""
        self.closed = True
        if self.callback in self.trainer.callbacks:
            self.trainer.callbacks.remove(self.callback)
        self.taps.remove()
        reporter = self.callback.reporter
        reporter.flush()
        reporter.remove_metric_source(self.taps.logged_metrics)


def attach(trainer: Foreign, reporter: Reporter) -> LightningHandle:
    """Add the callback to ``trainer`` and wrap its logger connector's ``log_metrics``.

    Raises:
        TraincardError: this Lightning's Trainer has no logger connector with ``log_metrics``
            (where every 2.x release has one), so the logged values could not be read.
    """
    pl = _package(trainer)
    connector = getattr(trainer, "_logger_connector", None)
    if not callable(getattr(connector, CONNECTOR_METHOD, None)):
        raise TraincardError(
            f"{pl.__name__} {pl.__version__}: its Trainer has no _logger_connector.log_metrics, "
            "where traincard-otel reads the values self.log() logs; report this version, and "
            "call traincard_otel.configure().metrics() from a Callback meanwhile"
        )
    taps = StepTaps(reporter, trainer)
    callback = callback_class(pl)(reporter, taps)
    taps.install_connector(connector)
    reporter.add_metric_source(taps.logged_metrics)
    trainer.callbacks.append(callback)
    return LightningHandle(trainer, callback, taps)
