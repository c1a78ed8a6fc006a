"""Hugging Face ``transformers.Trainer`` adapter (TRL/PEFT trainers are Trainer subclasses).

A callback maps Trainer events to the reporter: train/eval/save phases with their real
durations, checkpoints from ``on_save`` with the best-model metric, status fields for the ETA,
and heartbeats. Token and sample counts come from the batches themselves (``training_step`` is
wrapped on the instance) because the Trainer only logs throughput at the end of training; the
same wrapper measures the time each step waited for its batches.

Every dict the Trainer logs is read from ``state.log_history`` off the training thread
(:mod:`._hf_history`). Eval metrics are the exception: ``on_evaluate`` reports them itself,
inside the eval phase and at its end.

The callback, :class:`HFCallback`, is a ``TrainerCallback`` that users may pass in ``callbacks``;
it is called through the handler's methods, wrapped on the instance, rather than from the
handler's list (see the class).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from .._analysis.flops import training_fields
from .._configure import configure
from .._optional import require
from .._safety import guarded, internal_error, warn_once
from .._schema import Attr, Event
from .._schema.records import LOOP_FIELD, RL_LOOP
from .._types import Foreign, Reported
from .._write.report.reporter import Phase, Reporter
from ..exceptions import TraincardError
from ._anatomy import Anatomy
from ._anatomy import install as install_anatomy
from ._arguments import changed_arguments
from ._hf_history import LoggedReport, LogHistoryReader, numeric
from ._hf_taps import TAPPED_EVENTS, HandlerEvent, agreement, counting_step, reporting_failure, tap
from ._registry import calling_object, checked_settings, claim
from ._rl import is_online_rl, tap_log

transformers = require("transformers", "hf")

MIN_VERSION = (4, 40)


def _check_version() -> None:
    parts = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise TraincardError(
            f"transformers {transformers.__version__} is too old; traincard-otel supports >= "
            f"{'.'.join(map(str, MIN_VERSION))}"
        )


def _holds(callback: object) -> Callable[[object], bool]:
    """Whether an object is a Trainer with ``callback`` in its handler's list."""
    return lambda obj: callback in getattr(getattr(obj, "callback_handler", None), "callbacks", ())


# transformers ships no type information for its callback base class: Any to mypy.
class HFCallback(transformers.TrainerCallback):  # type: ignore[misc,name-defined]
    """Reports a Trainer's metrics, phases, checkpoints and progress to the card and OTel.

    ``Trainer(callbacks=[HFCallback()])`` (TRL's trainers too) and ``instrument(trainer)`` wire this
    same adapter. Passed in ``callbacks``, it binds to its Trainer at the first event it receives
    (``on_init_end``, at the end of the Trainer's construction) and leaves the handler's list:
    from then on it is called through the handler's own methods, wrapped on the instance after the
    registered callbacks (so it sees the final ``TrainerControl``). The handler calls every
    registered callback at every event, five a step, with six keyword arguments built afresh,
    about 3 µs a step for each event a callback ignores; for ``on_step_end``, run every step, the
    wrapper is the callback's own code, one Python call less.

    Args:
        **settings: passed to :func:`traincard_otel.configure` when it binds.
    """

    def __init__(self, **settings: Reported) -> None:
        self.settings = checked_settings(settings)
        self.reporter: Reporter = None  # type: ignore[assignment]  # set when it binds
        self.trainer: Foreign = None  # the Trainer reported, once bound
        self.model: Foreign = None  # the Trainer's, for the model FLOPs per token
        self._train: Phase | None = None
        self._eval: Phase | None = None
        self._save: Phase | None = None
        self._pending_save = False
        self.last_step_end: float | None = None
        # The current step's batches, as counted by the training_step wrapper (see attach()).
        self.samples = 0
        self.tokens = 0
        self._last_eval: dict[str, float] = {}
        self.data_wait: float | None = None
        self.history = LogHistoryReader()
        self.agree: Callable[[bool], bool] | None = None  # the ranks' stop flags, combined (stop_on)
        self.anatomy: Anatomy | None = None  # the step anatomy's hooks, while train() runs

    # -- binding -------------------------------------------------------------------------------
    def _bound(self) -> bool:
        """Whether this callback reports for a Trainer. One the handler calls before it is bound was
        passed in ``callbacks``: it binds to the Trainer dispatching the event, unless another door
        instrumented that Trainer first (then it leaves the handler's list, and reports nothing)."""
        if self.trainer is not None:
            return True
        trainer = calling_object(_holds(self), skip=self)
        if trainer is None:
            warn_once(
                "hf-callback-unbound",
                "traincard: HFCallback could not find its Trainer; call traincard_otel.instrument(trainer)",
            )
            return False
        handle = claim(trainer, lambda: attach(trainer, {}, self))
        if self.trainer is None:  # a duplicate door: the Trainer reports through another callback
            handler = trainer.callback_handler
            handler.callbacks = [c for c in handler.callbacks if c is not self]
        return isinstance(handle, HFHandle) and handle.callback is self

    @guarded("hf.on_init_end", None, passes=(TraincardError,))  # a bad setting stops the making
    def on_init_end(self, args: object, state: object, control: object, **kwargs: object) -> None:
        self._bound()

    # -- logged metrics ------------------------------------------------------------------------
    def logged_metrics(self) -> list[LoggedReport]:
        """The reporter's metric source: the dicts logged since the last read, as reports.

        While an eval phase is open in training, reading stops at the first dict with ``eval_``
        metrics: ``on_evaluate`` (or the end of training) reports those, inside the phase.
        """
        return self.history.take(hold_eval=self._eval is not None and self._train is not None)

    @guarded("hf.report_logged", None)
    def report_logged(self) -> None:
        """Report the eval metrics logged and not read yet, now, on the calling thread (at the end
        of an evaluation, or of a failed run); the train metrics are left to the source, which
        times them at their step's end."""
        self.history.report_eval(self.reporter.metrics)

    # -- Trainer events --------------------------------------------------------------------------
    @guarded("hf.on_train_begin", None)
    def on_train_begin(self, args: Foreign, state: Foreign, control: Foreign, **kwargs: object) -> None:
        if not self._bound():
            return
        self.history.follow(state.log_history)  # a new TrainerState: loaded from the checkpoint on resume
        world = max(int(getattr(args, "world_size", 1) or 1), 1)
        batch = int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps) * world
        self.reporter.progress(
            step=state.global_step,
            max_steps=state.max_steps,
            num_epochs=None if args.max_steps > 0 else args.num_train_epochs,
            batch_size=batch,
            world_size=world,
            epoch=state.epoch or 0.0,
        )
        if state.global_step > 0:
            self.reporter.event(
                Event.RUN_RESUMED,
                {Attr.STEP: state.global_step, Attr.RESUME_SOURCE: "resume_from_checkpoint"},
            )
        if self.model is not None:  # model FLOPs per token and the accelerator's peak, for the MFU
            dtype = "bf16" if args.bf16 else "fp16" if args.fp16 else "tf32" if args.tf32 else "fp32"
            self.reporter.progress(**training_fields(self.model, dtype))
        changed = changed_arguments(args)
        if changed:
            self.reporter.hyperparameters(changed)
        if self.anatomy is None:  # on the model, the optimizer and the accelerator train() made
            trainer = self.trainer
            backward = None if getattr(trainer, "use_apex", False) else getattr(trainer, "accelerator", None)
            self.anatomy = install_anatomy(
                self.reporter, model=trainer.model, optimizer=trainer.optimizer, backward=backward
            )
        self._train = self.reporter.phase("train")
        self.last_step_end = time.perf_counter()

    # -- the per-step event ---------------------------------------------------------------------
    # This builds the handler's wrapped method itself rather than a hook for tap() to call: on a
    # step's cold caches every Python call layer costs µs (about 2 µs here, in training).
    def tap_step_end(self, original: HandlerEvent) -> HandlerEvent:
        """``handler.on_step_end`` that reports the step after the registered callbacks ran."""
        perf_counter, step_end = time.perf_counter, self.reporter.step_end
        reporter, agree = self.reporter, self.agree

        def on_step_end(args: object, state: Foreign, control: Foreign) -> Foreign:
            control = original(args, state, control)
            try:
                now = perf_counter()
                last, self.last_step_end = self.last_step_end, now
                # Positional: keyword arguments cost µs more on the cold caches of a step.
                step_end(
                    state.global_step,
                    now - last if last is not None else None,
                    self.samples or None,
                    self.tokens or None,
                    self.data_wait,
                    state.epoch,
                    now,
                )
                self.samples = self.tokens = 0
                self.data_wait = None
                stop = reporter.should_stop
                if agree is not None and agree(stop) > stop:
                    reporter.stop_early("another rank's stop_on rule")
                    stop = True
                if stop:  # stop_on: the Trainer saves, then leaves its loop, as for max_steps
                    control.should_save = control.should_training_stop = True
                self._pending_save = bool(control.should_save)
                if control.should_evaluate:
                    self._open_eval()
                elif self._pending_save:
                    self._open_save()
            except Exception as exc:
                internal_error("hf.on_step_end", exc)
            return control

        return on_step_end

    @guarded("hf.on_epoch_end", None)
    def on_epoch_end(self, args: object, state: Foreign, control: Foreign, **kwargs: object) -> None:
        if self.trainer is None and not self._bound():
            return
        self.reporter.progress(epoch=state.epoch)
        self._pending_save = self._pending_save or bool(control.should_save)
        if control.should_evaluate and self._eval is None:
            self._open_eval()
        elif self._pending_save and self._save is None:
            self._open_save()

    def _open_eval(self) -> None:
        if self._eval is None:
            self._eval = self.reporter.phase("eval")

    def _open_save(self) -> None:
        if self._save is None:
            self._save = self.reporter.phase("save")

    @guarded("hf.on_prediction_step", None)
    def on_prediction_step(self, args: object, state: object, control: object, **kwargs: object) -> None:
        if self.trainer is None and not self._bound():
            return
        self._open_eval()  # trainer.evaluate() called directly, outside the training loop
        self.reporter.heartbeat()

    @guarded("hf.on_evaluate", None)
    def on_evaluate(
        self,
        args: object,
        state: object,
        control: object,
        metrics: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> None:
        if self.trainer is None and not self._bound():
            return
        self.report_logged()  # the eval metrics, logged just before, timed and placed in the phase
        if metrics:
            self._last_eval.update({k: float(v) for k, v in numeric(metrics).items()})
        if self._eval is not None:
            self._eval.end()
            self._eval = None
        if self._pending_save:
            self._open_save()
        self.last_step_end = time.perf_counter()  # evaluation time is not step time

    @guarded("hf.on_save", None)
    def on_save(self, args: Foreign, state: Foreign, control: Foreign, **kwargs: object) -> None:
        if self.trainer is None and not self._bound():
            return
        path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        meta: dict[str, object] = {}
        metric = getattr(args, "metric_for_best_model", None)
        if metric:
            key = metric if metric.startswith("eval_") else f"eval_{metric}"
            meta.update(metric=key, greater_is_better=bool(args.greater_is_better))
            if key in self._last_eval:
                meta["value"] = self._last_eval[key]
            if state.best_model_checkpoint:
                meta["best"] = os.path.abspath(state.best_model_checkpoint) == os.path.abspath(path)
        self.reporter.checkpoint(path, step=state.global_step, metadata=meta)
        if self._save is not None:
            self._save.end()
            self._save = None
        self._pending_save = False
        self.last_step_end = time.perf_counter()

    @guarded("hf.on_train_end", None)
    def on_train_end(self, args: object, state: object, control: object, **kwargs: object) -> None:
        if self.trainer is None and not self._bound():
            return
        for ph in (self._save, self._eval, self._train):
            if ph is not None:
                ph.end()
        self._save = self._eval = self._train = None
        if self.anatomy is not None:
            self.anatomy.remove()
            self.anatomy = None
        self.reporter.flush(timeout_s=2.0)


class HFHandle:
    """Returned by :func:`traincard_otel.instrument` for a Trainer."""

    def __init__(
        self,
        trainer: Foreign,
        callback: HFCallback,
        wrapped: list[tuple[object, Mapping[str, object]]],
    ) -> None:
        self.trainer, self.callback = trainer, callback
        self._wrapped = wrapped  # (object, {attribute: our wrapper set on it})
        self.closed = False  # instrument() attaches afresh once closed

    def close(self) -> None:
        """Detach from the Trainer (its own methods back in place) and flush what was reported."""
        self.closed = True
        for obj, attrs in self._wrapped:
            for name, wrapper in attrs.items():
                if vars(obj).get(name) is wrapper:
                    delattr(obj, name)
        self._wrapped = []
        if self.callback.anatomy is not None:
            self.callback.anatomy.remove()
            self.callback.anatomy = None
        reporter = self.callback.reporter
        self.callback.report_logged()
        reporter.flush()
        reporter.remove_metric_source(self.callback.logged_metrics)


def attach(
    trainer: Foreign, settings: Mapping[str, Reported], callback: HFCallback | None = None
) -> HFHandle:
    """Bind ``callback`` (else an unbound :class:`HFCallback` passed in the Trainer's ``callbacks``,
    else a new one) to ``trainer``, reporting to :func:`configure` with ``settings`` and the
    callback's own: tap the Trainer's callback handler and wrap ``train``/``training_step`` on the
    instance. Every :class:`HFCallback` leaves the handler's list: this one is called through the
    taps, and any other would report the same Trainer twice."""
    _check_version()
    handler = trainer.callback_handler
    if callback is None:
        passed = (c for c in handler.callbacks if isinstance(c, HFCallback) and c.trainer is None)
        callback = next(passed, None)
    callback = callback if callback is not None else HFCallback()
    handler.callbacks = [c for c in handler.callbacks if not isinstance(c, HFCallback)]
    callback.reporter = reporter = configure(**{**settings, **callback.settings})
    callback.trainer, callback.model = trainer, trainer.model
    running = reporter.settings
    if running is not None and running.stop_on and int(getattr(trainer.args, "world_size", 1) or 1) > 1:
        callback.agree = agreement(trainer)
    taps = {event: tap(handler, event, callback) for event in TAPPED_EVENTS}
    training_step = counting_step(trainer.training_step, callback)
    train = reporting_failure(trainer.train, trainer, callback, reporter)
    for event, tapped in taps.items():
        setattr(handler, event, tapped)
    callback.history.follow(trainer.state.log_history)  # trainer.evaluate() before any train()
    reporter.add_metric_source(callback.logged_metrics)
    trainer.training_step = training_step
    trainer.train = train
    own = {"training_step": training_step, "train": train}
    if is_online_rl(trainer):  # the card's RL layout, and the scored completions
        reporter.progress(**{LOOP_FIELD: RL_LOOP})
        own["log"] = trainer.log = tap_log(trainer, reporter)
    return HFHandle(trainer, callback, [(handler, taps), (trainer, own)])
