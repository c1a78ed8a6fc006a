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

import collections
import functools
import importlib
import inspect
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import NamedTuple

from .._insights.flops import compute_dtype, training_fields
from .._reporter import Phase, Reporter
from .._safety import guarded, internal_error
from .._schema import Attr, Event
from .._types import Foreign, Reported
from ..exceptions import MissingDependencyError, TraincardError

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


def batch_reader(batch: Foreign) -> tuple[tuple[object, ...], bool] | None:
    """Where a batch's size is read: the keys and indices from the batch to the tensor whose
    leading dimension counts its samples (``input_ids``, else the first tensor found), and
    whether that tensor holds token ids (``input_ids``, or an integer tensor of two dimensions,
    batch by sequence: its element count is the batch's tokens). None: no tensor in it."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        if not len(shape):
            return None
        return (), len(shape) == 2 and getattr(batch, "dtype", None) in _token_dtypes()
    keys: Iterable[object]
    if isinstance(batch, Mapping):
        if len(getattr(batch.get("input_ids"), "shape", ())) >= 2:
            return ("input_ids",), True
        keys = list(batch)
    elif isinstance(batch, (list, tuple)):
        keys = range(len(batch))
    else:
        return None
    for key in keys:
        inner = batch_reader(batch[key])
        if inner is not None:
            return (key, *inner[0]), inner[1]
    return None


@functools.cache
def _token_dtypes() -> frozenset[Foreign]:
    """The dtypes of token ids (torch is imported: Lightning, which built the batch, imports it)."""
    torch = sys.modules["torch"]
    return frozenset((torch.int64, torch.int32, torch.int16))


def precision_dtype(precision: str, module: Foreign) -> str:
    """The dtype of the matrix multiplications for a Trainer's ``precision`` ("bf16-mixed",
    "16-true", "transformer-engine", "64-true", "32-true", ...), as the peak table names it: bf16,
    fp16, fp8, fp64 (no table figure: an unknown peak, rather than a 32-bit one), and for 32-bit
    precision what :func:`~traincard_otel._insights.flops.compute_dtype` reads from the module
    (fp32, or tf32 where CUDA matmuls may use it)."""
    precision = str(precision)
    for prefix, dtype in (("bf16", "bf16"), ("16", "fp16"), ("transformer-engine", "fp8"), ("64", "fp64")):
        if precision.startswith(prefix):
            return dtype
    return compute_dtype(module)


class _ModelView(NamedTuple):
    """A LightningModule's parameters (the wrapped transformer's and any head's) with the config
    of the transformer it wraps, for the FLOPs per token."""

    parameters: Callable[[], Iterator[Foreign]]
    config: Foreign


def flops_model(module: Foreign) -> Foreign:
    """What :func:`training_fields` reads for ``module``: the module itself when it has a
    ``config`` (or wraps nothing with one), else its parameters with the ``config`` of the first
    submodule that has one (an HF model held as ``module.model``, say)."""
    if getattr(module, "config", None) is not None:
        return module
    for sub in module.modules():
        config = getattr(sub, "config", None)
        if config is not None:
            return _ModelView(module.parameters, config)
    return module


# Hooks Lightning dispatches to every callback at every training step; the callback uses none of
# them (the step ends come from the module's hooks, see the module docstring).
UNUSED_STEP_HOOKS = (
    "on_train_batch_start",
    "on_train_batch_end",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
)
# The LightningModule's hooks wrapped on the instance while a fit runs.
MODULE_HOOKS = ("on_train_batch_start", "on_train_batch_end")
# The logger connector's method that every logged dict goes through (wrapped on the instance).
CONNECTOR_METHOD = "log_metrics"

_ABSENT = object()


@functools.cache
def _dispatch_skips_non_callables(pl: ModuleType) -> bool:
    """Whether this Lightning's callback dispatch skips a hook attribute that is not callable
    (``if callable(fn)`` in ``_call_callback_hooks``, as in every 2.x release); read from its source."""
    try:
        call = importlib.import_module(f"{pl.__name__}.trainer.call")
        return "if callable(fn)" in inspect.getsource(call._call_callback_hooks)
    except Exception:  # no source shipped, or another layout: keep every hook
        return False


class StepTaps:
    """The per-step work: the module's batch hooks and the logger connector's ``log_metrics``,
    each wrapped on its instance (see the module docstring); :meth:`remove` puts them back."""

    def __init__(self, reporter: Reporter, trainer: Foreign) -> None:
        self.reporter, self.trainer = reporter, trainer
        self.last_end: float | None = None  # perf_counter() at the last step end reported
        self.wait: float | None = None  # the data wait of the step under way
        self.samples = 0  # the step's micro-batches so far
        self.tokens = 0
        self.step: int | None = None  # the last step reported
        self.progress: Foreign = None  # .completed is trainer.global_step (see step_progress())
        self.batch_type: type | None = None  # batches of this type are read along self.path
        self.path: tuple[object, ...] | None = None
        self.token_ids = False
        self.batch_size: int | None = None
        self.save: Phase | None = None  # a checkpoint save seen and not recorded yet
        self.save_at = 0.0
        self.on_checkpoints: Callable[[], None] = lambda: None  # records new checkpoint files
        self._eval_keys: dict[tuple[str, ...], bool] = {}  # a logged dict's names -> any eval metric
        # (logged dict, step given, Lightning's default step) of training steps, not read yet: a
        # deque, since appending and popping from two threads is atomic.
        self.pending: collections.deque[tuple[Mapping[str, Reported], int | None, int]] = collections.deque()
        self.stepping = False  # in a fit's training steps (logged values read off the thread)
        self._installed: list[tuple[Foreign, str, Foreign, object]] = []  # (object, name, wrapper, previous)

    # -- installing ----------------------------------------------------------------------------
    def _wrap(self, obj: Foreign, name: str, make: Callable[[Foreign], Foreign]) -> None:
        original = getattr(obj, name)
        wrapper = functools.wraps(original)(make(original))  # __wrapped__: is_overridden is unchanged
        self._installed.append((obj, name, wrapper, vars(obj).get(name, _ABSENT)))
        setattr(obj, name, wrapper)

    def install_connector(self, connector: Foreign) -> None:
        """Wrap the logger connector's ``log_metrics`` (at attach: ``trainer.validate()`` logs too)."""
        self._wrap(connector, CONNECTOR_METHOD, self._log_metrics)

    def install_module(self, module: Foreign) -> None:
        """Wrap the module's batch hooks, for the fit that starts."""
        self._wrap(module, "on_train_batch_start", self._batch_start)
        self._wrap(module, "on_train_batch_end", self._batch_end)

    def remove(self, module_only: bool = False) -> None:
        """Put back what was wrapped (the module's hooks only, with ``module_only``)."""
        kept = []
        for obj, name, wrapper, previous in reversed(self._installed):
            if module_only and name not in MODULE_HOOKS:
                kept.append((obj, name, wrapper, previous))
                continue
            if vars(obj).get(name) is wrapper:
                if previous is _ABSENT:
                    delattr(obj, name)
                else:
                    setattr(obj, name, previous)
        self._installed = kept[::-1]

    def start(self, trainer: Foreign, module: Foreign) -> None:
        """Follow the fit that starts: its step counter, and the module's batch hooks."""
        self.progress = step_progress(trainer, module)
        self.step, self.wait, self.samples, self.tokens = self.progress.completed, None, 0, 0
        self.install_module(module)
        self.stepping = True
        self.last_end = time.perf_counter()

    def count(self, batch: Foreign) -> tuple[int, int]:
        """(samples, tokens) of ``batch`` (0: unknown), finding where to read them for its kind of
        batch first (:func:`batch_reader`); the batch-end wrapper reads them along that path."""
        self.batch_type, reader = type(batch), batch_reader(batch)
        self.path, self.token_ids = reader if reader is not None else (None, False)
        if reader is None:
            return 0, 0
        for key in reader[0]:
            batch = batch[key]
        shape = batch.shape
        return int(shape[0]), (math.prod(shape) if self.token_ids else 0)

    # -- the per-step wrappers -----------------------------------------------------------------
    # try/except inline rather than @guarded, and as little as possible: on a step's cold caches
    # every Python call costs microseconds.
    def _batch_start(self, original: Foreign) -> Foreign:
        perf_counter = time.perf_counter

        def on_train_batch_start(batch: Foreign, batch_idx: int) -> Foreign:
            try:
                now = perf_counter()
                last = self.last_end
                if self.save is not None:  # saved between steps (an evaluation's or epoch's end)
                    self.on_checkpoints()  # ends the save phase: last_end is then its end
                    last = self.last_end
                    now = max(now, last or now)  # the save's time is neither step time nor wait
                if self.wait is None and last is not None:  # a step's first micro-batch
                    self.wait = now - last
            except Exception as exc:
                internal_error("lightning.on_train_batch_start", exc)
            return original(batch, batch_idx)  # may return -1: skip the rest of the epoch

        return on_train_batch_start

    def _batch_end(self, original: Foreign) -> Foreign:
        perf_counter, step_end, prod = time.perf_counter, self.reporter.step_end, math.prod

        def on_train_batch_end(outputs: object, batch: Foreign, batch_idx: int) -> Foreign:
            result = original(outputs, batch, batch_idx)
            try:
                now = perf_counter()
                # The batch's size along the path found for its kind (batch_reader): a cold
                # search of the batch's structure at every step cost about 5 µs.
                path = self.path
                try:
                    if type(batch) is not self.batch_type or path is None:
                        raise LookupError  # a new kind of batch: find its path
                    item: Foreign = batch
                    for key in path:
                        item = item[key]
                    shape = item.shape
                    samples, tokens = shape[0], (prod(shape) if self.token_ids else 0)
                except (LookupError, AttributeError, TypeError):  # laid out otherwise than before
                    samples, tokens = self.count(batch)
                self.samples += samples
                self.tokens += tokens
                step = self.progress.completed  # trainer.global_step, without its property chain
                if step != self.step:  # an optimizer step was taken (not a micro-batch accumulating)
                    last, end = self.last_end, now
                    if self.save is not None:  # ModelCheckpoint saved after the step's work
                        end = self.save_at
                        self.on_checkpoints()  # ends the save phase: last_end is then its end
                        now = max(now, self.last_end or now)  # the next step starts after it
                    self.last_end, self.step = now, step
                    # Positional: keyword arguments cost µs more on the cold caches of a step.
                    step_end(
                        step,
                        end - last if last is not None else None,
                        self.samples or None,
                        self.tokens or None,
                        self.wait,
                        None,
                        end,
                    )
                    if self.samples != self.batch_size:
                        self.batch_size = self.samples
                        self.reporter.progress(batch_size=self.samples * self.trainer.world_size or None)
                    self.samples = self.tokens = 0
                    self.wait = None
            except Exception as exc:
                internal_error("lightning.on_train_batch_end", exc)
            return result

        return on_train_batch_end

    def _log_metrics(self, original: Foreign) -> Foreign:
        pending, trainer = self.pending, self.trainer

        def log_metrics(metrics: Mapping[str, Reported], step: int | None = None) -> Foreign:
            try:
                if metrics:
                    at = trainer.fit_loop.epoch_loop._batches_that_stepped  # Lightning's default step
                    if self.stepping:  # read by logged_metrics(), off the training thread
                        pending.append((metrics, step, at))
                    else:  # an evaluation's: reported now, inside its phase
                        self.report(metrics, step, at)
            except Exception as exc:
                internal_error("lightning.log_metrics", exc)
            return original(metrics, step)

        return log_metrics

    # -- logged values, off the training thread ------------------------------------------------
    def logged_metrics(self) -> list[tuple[dict[str, Reported], int, str]]:
        """The reporter's metric source: the dicts logged in training steps since the last read,
        their tensors as floats (a CUDA tensor waits for its value here, not in training)."""
        reports = []
        while True:
            try:
                logged = self.pending.popleft()
            except IndexError:  # (read by the pump's thread and by a flush: empty is the end)
                break
            reports.append(self._values(*logged))
        return [report for report in reports if report[0]]

    def report(self, metrics: Mapping[str, Reported], step: int | None, at: int) -> None:
        """Report a logged dict now, on the calling thread."""
        values, step, phase = self._values(metrics, step, at)
        if values:
            self.reporter.metrics(values, step, phase)

    def _values(
        self, metrics: Mapping[str, Reported], step: int | None, at: int
    ) -> tuple[dict[str, Reported], int, str]:
        """(values, step, phase) of a logged dict: its values as numbers where they are (the rest
        left for the converter to count), the step Lightning gives its loggers (the ``step``
        value logged, else ``at``) and the phase its names say."""
        values: dict[str, Reported] = {}
        for key, value in metrics.items():
            try:
                values[key] = float(value)
            except (TypeError, ValueError, RuntimeError):  # not one number: rejected and counted
                values[key] = value
        values.pop("epoch", None)  # Lightning adds it for its loggers; the card has its own
        logged = values.pop("step", None)
        if step is None:
            step = int(logged) if isinstance(logged, float) and logged.is_integer() else at
        keys = tuple(values)
        evaluating = self._eval_keys.get(keys)
        if evaluating is None:  # a module logs a few sets of names, over and over
            if len(self._eval_keys) > 64:
                self._eval_keys.clear()
            evaluating = self._eval_keys[keys] = any(k.startswith(("val", "eval")) for k in keys)
        return values, step, "eval" if evaluating else "train"


def step_progress(trainer: Foreign, module: Foreign) -> Foreign:
    """An object whose ``completed`` is ``trainer.global_step``, read once a step: the optimizer
    step counter of Lightning's optimization loop (automatic or manual, as the module says), read
    as one attribute rather than through the properties behind ``trainer.global_step`` (about
    2 µs a step on the cold caches of training); ``trainer.global_step`` itself where the loop
    is laid out otherwise."""
    loop = trainer.fit_loop.epoch_loop
    try:
        if module.automatic_optimization:
            total = loop.automatic_optimization.optim_progress.optimizer.step.total
        else:
            total = loop.manual_optimization.optim_step_progress.total
        if total.completed == trainer.global_step:
            return total
    except AttributeError:
        pass
    return _GlobalStep(trainer)


class _GlobalStep:
    """``trainer.global_step`` as ``completed``."""

    def __init__(self, trainer: Foreign) -> None:
        self.trainer = trainer

    @property
    def completed(self) -> int:
        return int(self.trainer.global_step)


def _hyperparameters(trainer: Foreign, module: Foreign) -> dict[str, Reported]:
    """What Lightning gives its loggers' ``log_hyperparams``: the module's and the datamodule's
    ``hparams_initial`` (each unless it was saved with ``logger=False``), without LightningCLI's
    ``_class_path``."""
    values: dict[str, Reported] = {}
    datamodule = getattr(trainer, "datamodule", None)
    for owner in (module, datamodule):
        if owner is not None and getattr(owner, "_log_hyperparams", False):
            values.update(getattr(owner, "hparams_initial", None) or {})
    values.pop("_class_path", None)
    return values


@functools.cache
def _callback_class(pl: ModuleType) -> type:
    """The Callback subclass for one Lightning namespace, built once."""

    callback_base = pl.Callback

    class TraincardCallback(callback_base):  # type: ignore[misc,valid-type]
        """Phases, progress, checkpoints, hyperparameters, the FLOPs per token and exceptions:
        the hooks Lightning calls once a fit, an epoch, an evaluation or a save."""

        def __init__(self, reporter: Reporter, taps: StepTaps) -> None:
            self.reporter, self.taps = reporter, taps
            self._train: Phase | None = None
            self._eval: Phase | None = None
            self._seen: set[str] = set()
            taps.on_checkpoints = self._record_checkpoints_now
            if _dispatch_skips_non_callables(pl):
                # Lightning calls every callback at each of these hooks, about 7 µs per callback
                # and hook in its dispatch, implemented or not; it skips an attribute that is not
                # callable, so the per-step hooks are switched off (elsewhere they stay no-ops).
                for hook in UNUSED_STEP_HOOKS:
                    setattr(self, hook, None)

        @guarded("lightning.on_train_start", None)
        def on_train_start(self, trainer: Foreign, pl_module: Foreign) -> None:
            max_steps = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
            if max_steps is None:
                try:
                    max_steps = int(trainer.estimated_stepping_batches)
                except Exception:
                    max_steps = None
            self.reporter.progress(
                step=trainer.global_step,
                max_steps=max_steps,
                num_epochs=trainer.max_epochs,
                world_size=trainer.world_size,
                epoch=trainer.current_epoch,
            )
            if trainer.global_step > 0:
                self.reporter.event(
                    Event.RUN_RESUMED,
                    {Attr.STEP: trainer.global_step, Attr.RESUME_SOURCE: "ckpt_path"},
                )
            hyperparameters = _hyperparameters(trainer, pl_module)
            if hyperparameters:
                self.reporter.hyperparameters(hyperparameters)
            # model FLOPs per token and the accelerator's peak, for the MFU
            fields = training_fields(flops_model(pl_module), precision_dtype(trainer.precision, pl_module))
            if fields:
                self.reporter.progress(**fields)
            self._train = self.reporter.phase("train")
            self.taps.start(trainer, pl_module)

        @guarded("lightning.on_train_epoch_start", None)
        def on_train_epoch_start(self, trainer: Foreign, pl_module: Foreign) -> None:
            self._record_checkpoints(trainer)
            self.reporter.progress(epoch=trainer.current_epoch)

        @guarded("lightning.on_validation_start", None)
        def on_validation_start(self, trainer: Foreign, pl_module: Foreign) -> None:
            self._record_checkpoints(trainer)
            self.taps.stepping = False  # what an evaluation logs is reported inside its phase
            if not trainer.sanity_checking:
                self._eval = self.reporter.phase("eval")

        @guarded("lightning.on_validation_batch_end", None)
        def on_validation_batch_end(self, trainer: Foreign, *args: object, **kwargs: object) -> None:
            self.reporter.heartbeat()

        @guarded("lightning.on_validation_end", None)
        def on_validation_end(self, trainer: Foreign, pl_module: Foreign) -> None:
            if self._eval is not None:
                self._eval.end()
                self._eval = None
            self.taps.stepping = self._train is not None  # back to training steps, if in a fit
            self.taps.last_end = time.perf_counter()  # validation time is not step time

        @guarded("lightning.on_save_checkpoint", None)
        def on_save_checkpoint(self, trainer: Foreign, pl_module: Foreign, checkpoint: object) -> None:
            taps = self.taps
            if taps.save is None:  # ended once the file is seen, at the next batch hook
                taps.save_at = time.perf_counter()
                taps.save = self.reporter.phase("save")

        @guarded("lightning.on_train_end", None)
        def on_train_end(self, trainer: Foreign, pl_module: Foreign) -> None:
            self._record_checkpoints(trainer)
            self._close()
            self.reporter.flush(timeout_s=2.0)

        @guarded("lightning.on_exception", None)
        def on_exception(self, trainer: Foreign, pl_module: Foreign, exception: BaseException) -> None:
            if not isinstance(exception, (KeyboardInterrupt, SystemExit)):
                self.reporter.progress(step=trainer.global_step)
                self.reporter.failure(exception)
            self._close(exception)

        def _close(self, error: BaseException | None = None) -> None:
            self.taps.stepping = False
            self.taps.remove(module_only=True)
            for ph in (self.taps.save, self._eval, self._train):
                if ph is not None:
                    ph.end(error)
            self.taps.save = self._eval = self._train = None

        def _record_checkpoints_now(self) -> None:
            self._record_checkpoints(self.taps.trainer)

        def _record_checkpoints(self, trainer: Foreign) -> None:
            """ModelCheckpoint writes after the hooks that see the save ran; pick up its new files
            at the next batch hook."""
            for cb in getattr(trainer, "checkpoint_callbacks", []) or []:
                paths = list(getattr(cb, "best_k_models", {}) or {})
                # Without a monitor (Lightning's default checkpoint), each save is the "best" path.
                paths += [getattr(cb, "best_model_path", ""), getattr(cb, "last_model_path", "")]
                for path in paths:
                    if not path or path in self._seen:
                        continue  # (no stat() here: file I/O stays off the training thread)
                    self._seen.add(path)
                    score = (cb.best_k_models or {}).get(path)
                    meta: dict[str, Reported] = {"best": bool(cb.monitor) and path == cb.best_model_path}
                    if cb.monitor:
                        meta.update(metric=cb.monitor, greater_is_better=cb.mode == "max")
                        if score is not None:
                            meta["value"] = float(score)
                    self.reporter.checkpoint(path, step=trainer.global_step, metadata=meta)
            if self.taps.save is not None and self._seen:
                self.taps.save.end()
                self.taps.save = None
                self.taps.last_end = time.perf_counter()  # the save's time is no step's

    return TraincardCallback


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
    callback = _callback_class(pl)(reporter, taps)
    taps.install_connector(connector)
    reporter.add_metric_source(taps.logged_metrics)
    trainer.callbacks.append(callback)
    return LightningHandle(trainer, callback, taps)
