"""Hugging Face ``transformers.Trainer`` adapter (TRL/PEFT trainers are Trainer subclasses).

A callback maps Trainer events to the reporter: train/eval/save phases with their real
durations, checkpoints from ``on_save`` with the best-model metric, status fields for the ETA,
and heartbeats. Token and sample counts come from the batches themselves (``training_step`` is
wrapped on the instance) because the Trainer only logs throughput at the end of training; the
same wrapper measures the time each step waited for its batches.

Every dict the Trainer logs is read from ``state.log_history``, where ``Trainer.log`` appends it
(with its step) just before ``on_log``: the reporter's background thread reads it as a metric
source, so logging costs the training thread nothing (an ``on_log`` tap cost about 10 µs a step
when logging every step). Eval metrics are the exception: ``on_evaluate`` reports them itself,
inside the eval phase and at its end.

The callback is not added to ``trainer.callback_handler.callbacks``: the handler calls every
callback at every event with six keyword arguments built afresh, five events a step, so a
registered callback costs about 3 µs a step for each event it ignores. Instead the handler's
methods for the events used here are wrapped on the instance, calling the callback after the
registered ones (so it sees the final ``TrainerControl``, as a callback added last would); for
``on_step_end``, run every step, the wrapper is the callback's own code, one Python call less.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from itertools import chain

from .._insights.flops import training_fields
from .._optional import require
from .._reporter import Phase, Reporter
from .._safety import guarded, internal_error
from .._schema import Attr, Event
from .._schema.records import LOOP_FIELD, RL_LOOP
from .._types import Foreign, Reported
from ..exceptions import TraincardError
from ._anatomy import Anatomy
from ._anatomy import install as install_anatomy
from ._arguments import changed_arguments
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


_NUMBER = {float, int}


def _numeric(logs: Mapping[str, object]) -> dict[str, float]:
    return {k: v for k, v in logs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


#: What a Trainer logs: one dict per ``Trainer.log`` call (its step under ``"step"``), holding
#: whatever the Trainer and the user's callbacks logged.
LogHistory = list[dict[str, Reported]]

#: A logged dict read as a report: (values, step, phase), as a metric source returns it.
LoggedReport = tuple[dict[str, Reported], Reported, str]

#: A method of the Trainer's callback handler, called with (args, state, control).
HandlerEvent = Callable[..., Foreign]


class _Cursor:
    """The log history followed and the next entry to read, replaced as one object: the source
    may be mid-read when :meth:`TraincardCallback.follow` moves to a new history."""

    __slots__ = ("history", "next")

    def __init__(self, history: LogHistory, next: int) -> None:
        self.history, self.next = history, next


class TraincardCallback:
    """Reports a Trainer's metrics, phases, checkpoints and progress to a :class:`Reporter`.

    Not a registered ``TrainerCallback``: :func:`attach` wraps the callback handler's events.
    """

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
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
        self._history_lock = threading.Lock()
        self._history = _Cursor([], 0)
        self._unread: list[LoggedReport] = []  # read by report_logged, for the source
        self._eval_keys: dict[tuple[str, ...], bool] = {}  # a logged dict's names -> any eval_ metric
        self.agree: Callable[[bool], bool] | None = None  # the ranks' stop flags, combined (stop_on)
        # installs the step anatomy's hooks on the model and optimizer train() made (see attach())
        self.hook_anatomy: Callable[[], Anatomy | None] | None = None
        self.anatomy: Anatomy | None = None

    # -- logged metrics ------------------------------------------------------------------------
    def follow(self, history: LogHistory) -> None:
        """Report what is appended to ``history`` (a ``TrainerState.log_history``) from now on;
        what it holds already (a resumed run's) was reported by the run that logged it."""
        self._history = _Cursor(history, len(history))  # one assignment: the source may be mid-read

    def logged_metrics(self) -> list[LoggedReport]:
        """The reporter's metric source: the dicts logged since the last read, as reports.

        While an eval phase is open in training, reading stops at the first dict with ``eval_``
        metrics: ``on_evaluate`` (or the end of training) reports those, inside the phase.
        """
        with self._history_lock:
            reports, self._unread = self._unread, []
            reports += self._read_history(in_phase=True)
        return reports

    @guarded("hf.report_logged", None)
    def report_logged(self) -> None:
        """Report the eval metrics logged and not read yet, now, on the calling thread (at the end
        of an evaluation, or of a failed run); the train metrics are left to the source, which
        times them at their step's end."""
        with self._history_lock:
            for values, step, phase in self._read_history(in_phase=False):
                if phase == "eval":
                    self.reporter.metrics(values, step, phase)
                else:
                    self._unread.append((values, step, phase))

    def _read_history(self, *, in_phase: bool) -> list[LoggedReport]:
        """The dicts appended since the last read (the caller holds the lock); ``in_phase``: not
        those from the first with ``eval_`` metrics on, while an eval phase is open in training."""
        cursor = self._history
        history, start = cursor.history, cursor.next
        end = len(history)
        # Read after the end: an eval dict up to there was logged with its phase open already.
        hold_eval = in_phase and self._eval is not None and self._train is not None
        reports: list[LoggedReport] = []
        for entry in history[start:end]:
            values = dict(entry)
            step = values.pop("step", None)
            keys = tuple(values)
            evaluating = self._eval_keys.get(keys)
            if evaluating is None:  # a Trainer logs a few sets of names, over and over
                if len(self._eval_keys) > 64:
                    self._eval_keys.clear()
                evaluating = self._eval_keys[keys] = any(k.startswith("eval_") for k in keys)
            if evaluating and hold_eval:
                break
            reports.append((values, step, "eval" if evaluating else "train"))
        cursor.next = start + len(reports)
        # Numbers only: one pass over all the values in the common case.
        if not set(map(type, chain.from_iterable(values.values() for values, _s, _p in reports))) <= _NUMBER:
            reports = [(_numeric(values), step, phase) for values, step, phase in reports]
        return [report for report in reports if report[0]]

    # -- Trainer events --------------------------------------------------------------------------
    @guarded("hf.on_train_begin", None)
    def on_train_begin(self, args: Foreign, state: Foreign, control: Foreign, **kwargs: object) -> None:
        self.follow(state.log_history)  # a new TrainerState: loaded from the checkpoint on resume
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
        if self.hook_anatomy is not None and self.anatomy is None:
            self.anatomy = self.hook_anatomy()
        self._train = self.reporter.phase("train")
        self.last_step_end = time.perf_counter()

    # -- the per-step event ---------------------------------------------------------------------
    # This builds the handler's wrapped method itself rather than a hook for _tap() to call: on a
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
        self.report_logged()  # the eval metrics, logged just before, timed and placed in the phase
        if metrics:
            self._last_eval.update({k: float(v) for k, v in _numeric(metrics).items()})
        if self._eval is not None:
            self._eval.end()
            self._eval = None
        if self._pending_save:
            self._open_save()
        self.last_step_end = time.perf_counter()  # evaluation time is not step time

    @guarded("hf.on_save", None)
    def on_save(self, args: Foreign, state: Foreign, control: Foreign, **kwargs: object) -> None:
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
        for ph in (self._save, self._eval, self._train):
            if ph is not None:
                ph.end()
        self._save = self._eval = self._train = None
        if self.anatomy is not None:
            self.anatomy.remove()
            self.anatomy = None
        self.reporter.flush(timeout_s=2.0)


# The handler events the callback uses, each called as handler.<event>(args, state, control),
# plus the metrics for on_evaluate.
TAPPED_EVENTS = (
    "on_train_begin",
    "on_step_end",
    "on_epoch_end",
    "on_prediction_step",
    "on_evaluate",
    "on_save",
    "on_train_end",
)


def _tap(handler: Foreign, event: str, callback: TraincardCallback) -> HandlerEvent:
    original = getattr(handler, event)
    if event == "on_step_end":
        return callback.tap_step_end(original)
    hook = getattr(callback, event)

    def tapped(*args: object) -> object:  # the events of a run's start, end, epochs, evals and saves
        control = original(*args)
        hook(*args)
        return control

    return tapped


def _agreement(trainer: Foreign) -> Callable[[bool], bool]:
    """Every rank must stop at the same step, or the next collective hangs; only the ranks that
    judge the metrics see an anomaly. So with ``stop_on`` armed in a multi-rank run the ranks' flags
    are summed at each step end: one all-reduce of one number (the Trainer's own loss logging
    synchronises as much)."""
    import torch

    def agree(flag: bool) -> bool:
        mine = torch.tensor([1.0 if flag else 0.0], device=trainer.args.device)
        return bool(trainer.accelerator.reduce(mine, reduction="sum").item() > 0)

    return agree


class HFHandle:
    """Returned by :func:`traincard_otel.instrument` for a Trainer."""

    def __init__(
        self,
        trainer: Foreign,
        callback: TraincardCallback,
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
        reporter = self.callback.reporter
        self.callback.report_logged()
        reporter.flush()
        reporter.remove_metric_source(self.callback.logged_metrics)


def attach(trainer: Foreign, reporter: Reporter) -> HFHandle:
    """Tap ``trainer.callback_handler`` and wrap ``train``/``training_step`` on the instance."""
    _check_version()
    callback = TraincardCallback(reporter)
    callback.model = trainer.model
    callback.hook_anatomy = lambda: install_anatomy(
        reporter, model=trainer.model, optimizer=trainer.optimizer
    )
    settings = reporter.settings
    if settings is not None and settings.stop_on and int(getattr(trainer.args, "world_size", 1) or 1) > 1:
        callback.agree = _agreement(trainer)
    handler = trainer.callback_handler
    taps = {event: _tap(handler, event, callback) for event in TAPPED_EVENTS}
    step_fn = trainer.training_step
    train_fn = trainer.train

    perf_counter = time.perf_counter

    @functools.wraps(step_fn)
    def training_step(model: object, inputs: object, *rest: object, **kwargs: object) -> object:
        # The data wait (at a step's first micro-batch) and the batch's sample and token counts,
        # inline rather than in a method: this runs once per micro-batch, on the step's cold caches.
        cb = callback
        try:
            if cb.data_wait is None and cb.last_step_end is not None:
                # The Trainer fetches a step's batches between the previous step's end and here.
                cb.data_wait = perf_counter() - cb.last_step_end
            get = getattr(inputs, "get", None)  # a dict or a BatchEncoding
            shape = getattr(get("input_ids"), "shape", None) if get is not None else None
            if shape:
                n = shape[0]
                cb.samples += n
                if len(shape) == 2:  # (batch, sequence): spares math.prod's cold lookup and call
                    cb.tokens += n * shape[1]
                elif len(shape) > 2:
                    cb.tokens += math.prod(shape)
        except Exception as exc:  # the step itself must run
            internal_error("hf.training_step", exc)
        return step_fn(model, inputs, *rest, **kwargs)

    @functools.wraps(train_fn)
    def train(*args: object, **kwargs: object) -> object:
        try:
            return train_fn(*args, **kwargs)
        except BaseException as exc:
            if not isinstance(exc, SystemExit):  # (a KeyboardInterrupt: terminated by SIGINT)
                reporter.progress(step=trainer.state.global_step)  # other callbacks may have raised first
                callback.report_logged()  # the last metrics, for the failure summary
                reporter.failure(exc)
            raise

    for event, tapped in taps.items():
        setattr(handler, event, tapped)
    callback.follow(trainer.state.log_history)  # trainer.evaluate() before any train()
    reporter.add_metric_source(callback.logged_metrics)
    trainer.training_step = training_step
    trainer.train = train
    own = {"training_step": training_step, "train": train}
    if is_online_rl(trainer):  # the card's RL layout, and the scored completions
        reporter.progress(**{LOOP_FIELD: RL_LOOP})
        own["log"] = trainer.log = tap_log(trainer, reporter)
    return HFHandle(trainer, callback, [(handler, taps), (trainer, own)])
