"""The Lightning adapter as it was before 2026-11-25 (a Callback with batch hooks and a Logger),
frozen here only so that ``bench_step_pairs --before`` can measure it beside the current one in
the same run. Not part of the package; nothing else imports it.

Lightning adapter, for both ``lightning.pytorch`` and ``pytorch_lightning`` (never mixed).

``instrument(trainer)`` adds a Callback (phases, step ends, heartbeats, progress, checkpoints
written by ``ModelCheckpoint`` with their monitor value and best, exceptions) and a Logger (so
``self.log(...)`` values reach the card without a second logging call). Both classes are built
against the package the trainer itself comes from: mixing the two namespaces breaks Lightning.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import time
from types import ModuleType
from typing import Any

from traincard_otel._safety import guarded, internal_error
from traincard_otel._schema import Attr, Event
from traincard_otel._write.report.reporter import Phase, Reporter
from traincard_otel.exceptions import MissingDependencyError, TraincardError

MIN_VERSION = (2, 0)


def _package(trainer: Any) -> ModuleType:
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


def _batch_size(batch: Any) -> int | None:
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[0])
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for item in items:
        size = _batch_size(item)
        if size is not None:
            return size
    return None


# Hooks Lightning calls at every training step that the callback below does not implement.
UNUSED_STEP_HOOKS = (
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


@functools.cache
def _classes(pl: ModuleType) -> tuple[type, type]:
    """(Callback, Logger) subclasses for one Lightning namespace, built once."""
    callback_base, logger_base = pl.Callback, pl.loggers.Logger

    class TraincardCallback(callback_base):  # type: ignore[misc,valid-type]
        def __init__(self, reporter: Reporter) -> None:
            self.reporter = reporter
            self._train: Phase | None = None
            self._eval: Phase | None = None
            self._save: Phase | None = None
            self._last_end: float | None = None
            self._wait: float | None = None
            self._size: int | None = None
            self._seen: set[str] = set()
            if _dispatch_skips_non_callables(pl):
                # Lightning calls every callback at each of these hooks, about 7 µs per callback
                # and hook in its dispatch, implemented or not; it skips an attribute that is not
                # callable, so the per-step hooks this callback does not use are switched off.
                for hook in UNUSED_STEP_HOOKS:
                    setattr(self, hook, None)

        @guarded("lightning.on_train_start", None)
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
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
            self._train = self.reporter.phase("train")
            self._last_end = time.perf_counter()

        # The two per-step hooks: try/except inline rather than @guarded, and as little as
        # possible, since every Python call made on a step's cold caches costs microseconds.
        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            try:
                now = time.perf_counter()
                if self._save is not None:  # a checkpoint was saved since the last step
                    self._record_checkpoints(trainer)
                self._wait = now - self._last_end if self._last_end is not None else None
            except Exception as exc:
                internal_error("lightning.on_train_batch_start", exc)

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            try:
                now = time.perf_counter()
                duration = now - self._last_end if self._last_end is not None else None
                self._last_end = now
                size = _batch_size(batch)
                self.reporter.step_end(
                    trainer.global_step, duration, size, None, self._wait, trainer.current_epoch, now
                )
                if size != self._size:
                    self._size = size
                    self.reporter.progress(batch_size=size * trainer.world_size if size else None)
            except Exception as exc:
                internal_error("lightning.on_train_batch_end", exc)

        @guarded("lightning.on_validation_start", None)
        def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
            self._record_checkpoints(trainer)
            if not trainer.sanity_checking:
                self._eval = self.reporter.phase("eval")

        @guarded("lightning.on_validation_batch_end", None)
        def on_validation_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
            self.reporter.heartbeat()

        @guarded("lightning.on_validation_end", None)
        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if self._eval is not None:
                self._eval.end()
                self._eval = None
            self._last_end = time.perf_counter()  # validation time is not step time

        @guarded("lightning.on_save_checkpoint", None)
        def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
            if self._save is None:
                self._save = self.reporter.phase("save")  # ended once the file is seen

        @guarded("lightning.on_train_epoch_start", None)
        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            self._record_checkpoints(trainer)

        @guarded("lightning.on_train_end", None)
        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self._record_checkpoints(trainer)
            self._close()
            self.reporter.flush(timeout_s=2.0)

        @guarded("lightning.on_exception", None)
        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            if not isinstance(exception, (KeyboardInterrupt, SystemExit)):
                self.reporter.progress(step=trainer.global_step)
                self.reporter.failure(exception)
            self._close(exception)

        def _close(self, error: BaseException | None = None) -> None:
            for ph in (self._save, self._eval, self._train):
                if ph is not None:
                    ph.end(error)
            self._save = self._eval = self._train = None

        def _record_checkpoints(self, trainer: Any) -> None:
            """ModelCheckpoint writes after our hooks ran; pick up its new files at the next one."""
            for cb in getattr(trainer, "checkpoint_callbacks", []) or []:
                paths = list(getattr(cb, "best_k_models", {}) or {})
                # Without a monitor (Lightning's default checkpoint), each save is the "best" path.
                paths += [getattr(cb, "best_model_path", ""), getattr(cb, "last_model_path", "")]
                for path in paths:
                    if not path or path in self._seen:
                        continue  # (no stat() here: file I/O stays off the training thread)
                    self._seen.add(path)
                    score = (cb.best_k_models or {}).get(path)
                    meta: dict[str, Any] = {"best": bool(cb.monitor) and path == cb.best_model_path}
                    if cb.monitor:
                        meta.update(metric=cb.monitor, greater_is_better=cb.mode == "max")
                        if score is not None:
                            meta["value"] = float(score)
                    self.reporter.checkpoint(path, step=trainer.global_step, metadata=meta)
            if self._save is not None and self._seen:
                self._save.end()
                self._save = None

    class TraincardLogger(logger_base):  # type: ignore[misc,valid-type]
        """``self.log(...)`` values -> the reporter (rank 0 only, as Lightning loggers are)."""

        def __init__(self, reporter: Reporter) -> None:
            super().__init__()
            self.reporter = reporter

        @property
        def name(self) -> str:
            return "traincard"

        @property
        def version(self) -> str:
            return "0"

        @guarded("lightning.log_metrics", None)
        def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
            values = {k: v for k, v in metrics.items() if k != "epoch"}
            if values:
                phase = "eval" if any(k.startswith(("val", "eval")) for k in values) else "train"
                self.reporter.metrics(values, step=step, phase=phase)

        @guarded("lightning.log_hyperparams", None)
        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            items = (
                vars(params)
                if hasattr(params, "__dict__") and not isinstance(params, dict)
                else dict(params or {})
            )
            self.reporter.event(Event.HYPERPARAMS, body={str(k): str(v) for k, v in items.items()})

    return TraincardCallback, TraincardLogger


class LightningHandle:
    """Returned by :func:`traincard_otel.instrument` for a Lightning Trainer."""

    def __init__(self, trainer: Any, callback: Any, logger: Any) -> None:
        self.trainer, self.callback, self.logger = trainer, callback, logger
        self.closed = False  # instrument() attaches afresh once closed

    def close(self) -> None:
        """Detach the callback and logger and flush what was reported."""
        self.closed = True
        if self.callback in self.trainer.callbacks:
            self.trainer.callbacks.remove(self.callback)
        self.trainer.loggers = [lg for lg in self.trainer.loggers if lg is not self.logger]
        self.callback.reporter.flush()


def attach(trainer: Any, reporter: Reporter) -> LightningHandle:
    """Add the callback and the logger to ``trainer``."""
    callback_cls, logger_cls = _classes(_package(trainer))
    callback, logger = callback_cls(reporter), logger_cls(reporter)
    trainer.callbacks.append(callback)
    trainer.loggers = [*trainer.loggers, logger]
    return LightningHandle(trainer, callback, logger)
