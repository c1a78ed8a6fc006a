"""The Lightning Callback: what happens once a fit, an epoch, an evaluation or a save (phases,
progress, hyperparameters, the FLOPs per token, checkpoints, exceptions)."""

from __future__ import annotations

import functools
import importlib
import inspect
import time
from types import ModuleType

from ..._analysis.flops import training_fields
from ..._safety import guarded
from ..._schema import Attr, Event
from ..._types import Foreign, Reported
from ..._write.report.reporter import Phase, Reporter
from .batches import flops_model, precision_dtype
from .steps import StepTaps

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


@functools.cache
def callback_class(pl: ModuleType) -> type:
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

    return TraincardCallback
