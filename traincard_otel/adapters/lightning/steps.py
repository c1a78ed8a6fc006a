"""The per-step work of the Lightning adapter: the module's batch hooks and the logger
connector's ``log_metrics``, wrapped on their instances while a fit runs."""

from __future__ import annotations

import collections
import functools
import math
import os
import time
from collections.abc import Callable, Mapping

from ..._safety import internal_error
from ..._types import Foreign, Reported
from ..._write.report.reporter import Phase, Reporter
from .._anatomy import EVERY_PART, Anatomy, clock_for
from .batches import batch_reader

# The LightningModule's hooks wrapped on the instance while a fit runs.
MODULE_HOOKS = ("on_train_batch_start", "on_train_batch_end")
# ... and, for the step anatomy, those that mark the end of the training step's forward (and the
# loss backward starts from), the end of the backward and the start of the optimizer step (Lightning
# runs the forward and backward inside the optimizer's step, as its closure: the optimizer's own
# hooks cannot tell them apart).
ANATOMY_HOOKS = ("on_before_backward", "on_after_backward", "on_before_optimizer_step")
# The logger connector's method that every logged dict goes through (wrapped on the instance).
CONNECTOR_METHOD = "log_metrics"

_ABSENT = object()


class StepTaps:
    """The per-step work: the module's batch hooks and the logger connector's ``log_metrics``,
    each wrapped on its instance (see the package docstring); :meth:`remove` puts them back."""

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
        self.agree = False  # stop_on in a multi-rank fit: the ranks' stop flags are combined
        self.anatomy: Anatomy | None = None  # the step anatomy's clock, while a fit runs
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
        self.anatomy = clock_for(self.reporter, module)
        if self.anatomy is not None:
            self.anatomy.measure(EVERY_PART)
            self._wrap(module, "on_before_backward", self._before_backward)
            self._wrap(module, "on_after_backward", self._after_backward)
            self._wrap(module, "on_before_optimizer_step", self._before_optimizer_step)

    def remove(self, module_only: bool = False) -> None:
        """Put back what was wrapped (the module's hooks only, with ``module_only``)."""
        kept = []
        for obj, name, wrapper, previous in reversed(self._installed):
            if module_only and name not in MODULE_HOOKS + ANATOMY_HOOKS:
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
        settings = self.reporter.settings
        # Every rank must stop at the same step, or the next collective hangs; only the ranks that
        # judge the metrics see an anomaly: with stop_on armed, a reduction at each step end.
        self.agree = bool(settings is not None and settings.stop_on and trainer.world_size > 1)
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
                if self.anatomy is not None:
                    self.anatomy.clock.begin_forward()
            except Exception as exc:
                internal_error("lightning.on_train_batch_start", exc)
            return original(batch, batch_idx)  # may return -1: skip the rest of the epoch

        return on_train_batch_start

    # Without a process group the two hooks around Lightning's backward call are its start and end;
    # with one, a hook on the loss and autograd's callbacks tell the wait for the gradients'
    # collectives apart (adapters/_anatomy.py).
    def _before_backward(self, original: Foreign) -> Foreign:
        def on_before_backward(loss: Foreign) -> Foreign:
            try:
                anatomy = self.anatomy
                if anatomy is not None:
                    anatomy.clock.end_forward()
                    if not anatomy.marks.grouped():
                        anatomy.clock.begin_backward()
                    elif getattr(loss, "requires_grad", False):
                        anatomy.marks.arm(loss)
            except Exception as exc:
                internal_error("lightning.on_before_backward", exc)
            return original(loss)

        return on_before_backward

    def _after_backward(self, original: Foreign) -> Foreign:
        def on_after_backward() -> Foreign:
            try:
                anatomy = self.anatomy
                if anatomy is not None and not anatomy.marks.grouped():
                    anatomy.clock.end_backward(collectives=False)
            except Exception as exc:
                internal_error("lightning.on_after_backward", exc)
            return original()

        return on_after_backward

    def _before_optimizer_step(self, original: Foreign) -> Foreign:
        def on_before_optimizer_step(optimizer: Foreign) -> Foreign:
            try:
                if self.anatomy is not None:
                    self.anatomy.clock.begin_optimizer()
            except Exception as exc:
                internal_error("lightning.on_before_optimizer_step", exc)
            return original(optimizer)

        return on_before_optimizer_step

    def _batch_end(self, original: Foreign) -> Foreign:
        perf_counter, step_end, prod = time.perf_counter, self.reporter.step_end, math.prod

        def on_train_batch_end(outputs: object, batch: Foreign, batch_idx: int) -> Foreign:
            try:
                if self.anatomy is not None:
                    self.anatomy.clock.end_optimizer()  # (it does nothing unless a step began)
            except Exception as exc:
                internal_error("lightning.anatomy", exc)
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
                    stop = self.reporter.should_stop
                    if self.agree and self.trainer.strategy.reduce_boolean_decision(stop, all=False) > stop:
                        self.reporter.stop_early("another rank's stop_on rule")
                        stop = True
                    if stop and not self.trainer.should_stop:
                        self.stop_early(step)
            except Exception as exc:
                internal_error("lightning.on_train_batch_end", exc)
            return result

        return on_train_batch_end

    def stop_early(self, step: int) -> None:
        """``stop_on`` tripped: save a checkpoint where the checkpoint callback saves (else under
        the root directory), then stop the fit after this batch through ``trainer.should_stop``."""
        trainer = self.trainer
        callback = getattr(trainer, "checkpoint_callback", None)
        folder = getattr(callback, "dirpath", None) or os.path.join(trainer.default_root_dir, "checkpoints")
        path = os.path.join(folder, f"stopped-early-step={step}.ckpt")
        with self.reporter.phase("save"):
            trainer.save_checkpoint(path)
        self.reporter.checkpoint(path, step=step, metadata={"stopped_early": True})
        trainer.should_stop = True
        self.last_end = time.perf_counter()  # the save is no step's time

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
            except IndexError:  # (read by the converter's thread and by a flush: empty is the end)
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
