"""The Lightning Callback: what happens once a fit, an epoch, an evaluation or a save (phases,
progress, hyperparameters, the FLOPs per token, checkpoints, exceptions).

Users may pass it themselves, ``Trainer(callbacks=[LightningCallback()])``: it binds to its Trainer
in ``setup`` (at the start of a fit, validate, test or predict) through the same :func:`attach`
that ``instrument(trainer)`` runs, which adopts a callback found in ``trainer.callbacks``."""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import time
from collections.abc import Mapping
from types import ModuleType

from ..._analysis.flops import training_fields
from ..._configure import configure
from ..._safety import guarded
from ..._schema import Attr, Event
from ..._types import Foreign, Reported
from ..._write.report.reporter import Phase, Reporter
from ...exceptions import MissingDependencyError, TraincardError
from .._registry import checked_settings, claim
from .batches import flops_model, precision_dtype
from .steps import CONNECTOR_METHOD, StepTaps

#: The callback class built for each Lightning namespace (``lightning.pytorch``, ``pytorch_lightning``).
BUILT: dict[str, type] = {}

# Hooks Lightning dispatches to every callback at every training step; the callback uses none of
# them (the step ends come from the module's hooks, see the package docstring).
UNUSED_STEP_HOOKS = (
    "on_train_batch_start",
    "on_train_batch_end",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
)


@functools.cache
def _dispatch_skips_non_callables(pl: ModuleType) -> bool:
    """Whether this Lightning's callback dispatch skips a hook attribute that is not callable
    (``if callable(fn)`` in ``_call_callback_hooks``, as in every 2.x release); read from its source."""
    try:
        call = importlib.import_module(f"{pl.__name__}.trainer.call")
        return "if callable(fn)" in inspect.getsource(call._call_callback_hooks)
    except Exception:  # no source shipped, or another layout: keep every hook
        return False


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


def callback_class(pl: ModuleType) -> type:
    """The Callback subclass for one Lightning namespace, built once."""
    built = BUILT.get(pl.__name__)
    if built is None:
        built = BUILT[pl.__name__] = _build(pl)
    return built


def _build(pl: ModuleType) -> type:
    callback_base = pl.Callback

    class LightningCallback(callback_base):  # type: ignore[misc,valid-type]
        """Reports a Lightning Trainer's metrics (what ``self.log`` logs), phases, checkpoints,
        hyperparameters, progress, FLOPs per token and exceptions to the card and OTel.

        ``Trainer(callbacks=[LightningCallback()])`` and ``instrument(trainer)`` wire this same
        adapter (see the module docstring). Its hooks are those Lightning calls once a fit, an
        epoch, an evaluation or a save; the per-step work is done by :class:`StepTaps`.

        Args:
            **settings: passed to :func:`traincard_otel.configure` when it binds.
        """

        def __init__(self, **settings: Reported) -> None:
            self.settings = checked_settings(settings)
            self.reporter: Reporter = None  # type: ignore[assignment]  # set when it binds
            self.taps: StepTaps = None  # type: ignore[assignment]
            self._train: Phase | None = None
            self._eval: Phase | None = None
            self._seen: set[str] = set()
            if _dispatch_skips_non_callables(pl):
                # Lightning calls every callback at each of these hooks, about 7 µs per callback
                # and hook in its dispatch, implemented or not; it skips an attribute that is not
                # callable, so the per-step hooks are switched off (elsewhere they stay no-ops).
                for hook in UNUSED_STEP_HOOKS:
                    setattr(self, hook, None)

        def bind(self, reporter: Reporter, taps: StepTaps) -> None:
            """Report to ``reporter``, the per-step work done by ``taps`` (see :func:`attach`)."""
            self.reporter, self.taps = reporter, taps
            taps.on_checkpoints = self._record_checkpoints_now

        @guarded("lightning.setup", None, passes=(TraincardError,))  # a bad setting stops the fit
        def setup(self, trainer: Foreign, pl_module: Foreign, stage: str) -> None:
            if self.taps is None:  # passed in callbacks: bind, unless another door was first
                claim(trainer, lambda: attach(trainer, {}, self))

        @guarded("lightning.on_train_start", None)
        def on_train_start(self, trainer: Foreign, pl_module: Foreign) -> None:
            if self.taps is None:
                return
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
            if self.taps is None:
                return
            self._record_checkpoints(trainer)
            self.reporter.progress(epoch=trainer.current_epoch)

        @guarded("lightning.on_validation_start", None)
        def on_validation_start(self, trainer: Foreign, pl_module: Foreign) -> None:
            if self.taps is None:
                return
            self._record_checkpoints(trainer)
            self.taps.stepping = False  # what an evaluation logs is reported inside its phase
            if not trainer.sanity_checking:
                self._eval = self.reporter.phase("eval")

        @guarded("lightning.on_validation_batch_end", None)
        def on_validation_batch_end(self, trainer: Foreign, *args: object, **kwargs: object) -> None:
            if self.taps is None:
                return
            self.reporter.heartbeat()

        @guarded("lightning.on_validation_end", None)
        def on_validation_end(self, trainer: Foreign, pl_module: Foreign) -> None:
            if self.taps is None:
                return
            if self._eval is not None:
                self._eval.end()
                self._eval = None
            self.taps.stepping = self._train is not None  # back to training steps, if in a fit
            self.taps.last_end = time.perf_counter()  # validation time is not step time

        @guarded("lightning.on_save_checkpoint", None)
        def on_save_checkpoint(self, trainer: Foreign, pl_module: Foreign, checkpoint: object) -> None:
            if self.taps is None:
                return
            taps = self.taps
            if taps.save is None:  # ended once the file is seen, at the next batch hook
                taps.save_at = time.perf_counter()
                taps.save = self.reporter.phase("save")

        @guarded("lightning.on_train_end", None)
        def on_train_end(self, trainer: Foreign, pl_module: Foreign) -> None:
            if self.taps is None:
                return
            self._record_checkpoints(trainer)
            self._close()
            self.reporter.flush(timeout_s=2.0)

        @guarded("lightning.on_exception", None)
        def on_exception(self, trainer: Foreign, pl_module: Foreign, exception: BaseException) -> None:
            if self.taps is None:
                return
            if not isinstance(exception, SystemExit):  # (a KeyboardInterrupt: terminated by SIGINT)
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

    return LightningCallback


MIN_VERSION = (2, 0)
NAMESPACES = ("lightning.pytorch", "pytorch_lightning")
_HINT = "pip install 'traincard-otel[lightning]'"


def _supported(pl: ModuleType) -> ModuleType:
    parts = tuple(int(p) for p in pl.__version__.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise TraincardError(
            f"{pl.__name__} {pl.__version__} is not supported; traincard-otel supports >= 2.0"
        )
    return pl


def _package(trainer: Foreign) -> ModuleType:
    root = type(trainer).__module__.split(".", 1)[0]
    try:
        return _supported(importlib.import_module(NAMESPACES[root != "lightning"]))
    except ImportError as exc:
        raise MissingDependencyError(_HINT) from exc


def lightning_package() -> ModuleType:
    """The namespace a callback made now is for: the one imported already (``lightning.pytorch``
    when both are), else the one installed. Lightning calls a callback's hooks by name, so one
    built for the other namespace works too, in a list of callbacks."""
    loaded = [name for name in NAMESPACES if name in sys.modules]
    for name in (*loaded, *NAMESPACES):
        try:
            return _supported(importlib.import_module(name))
        except ImportError:
            continue
    raise MissingDependencyError(f"Lightning is needed for this; install it with: {_HINT}")


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


def attach(trainer: Foreign, settings: Mapping[str, Reported], callback: Foreign = None) -> LightningHandle:
    """Bind ``callback`` (else an unbound one passed in ``trainer.callbacks``, else a new one, added
    there) to ``trainer``, reporting to :func:`configure` with ``settings`` and the callback's own,
    and wrap the Trainer's logger connector's ``log_metrics``.

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
    if callback is None:
        ours = tuple(BUILT.values())
        passed = (c for c in trainer.callbacks if isinstance(c, ours) and getattr(c, "taps", 0) is None)
        callback = next(passed, None)
    if callback is None:
        callback = callback_class(pl)()
        trainer.callbacks.append(callback)
    reporter = configure(**{**settings, **callback.settings})
    taps = StepTaps(reporter, trainer)
    callback.bind(reporter, taps)
    taps.install_connector(connector)
    reporter.add_metric_source(taps.logged_metrics)
    return LightningHandle(trainer, callback, taps)
