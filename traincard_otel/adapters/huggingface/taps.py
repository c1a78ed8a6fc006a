"""How the adapter taps a Trainer instance: the callback handler's events, ``training_step`` (the
batches' sizes and the data wait) and ``train`` (a failure) wrapped on the instance, and the
handle that puts the Trainer's own methods back."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping

from ..._optional import require
from ..._safety import internal_error
from ..._schema.records import LOOP_FIELD, RL_LOOP
from ..._types import Foreign
from ..._write.report.reporter import Reporter
from ...exceptions import TraincardError
from .._rl import is_online_rl, tap_log
from .callback import HandlerEvent, TraincardCallback

transformers = require("transformers", "hf")

MIN_VERSION = (4, 40)


def _check_version() -> None:
    parts = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    if parts < MIN_VERSION:
        raise TraincardError(
            f"transformers {transformers.__version__} is too old; traincard-otel supports >= "
            f"{'.'.join(map(str, MIN_VERSION))}"
        )


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
        reporter = self.callback.reporter
        self.callback.report_logged()
        reporter.flush()
        reporter.remove_metric_source(self.callback.logged_metrics)


def attach(trainer: Foreign, reporter: Reporter) -> HFHandle:
    """Tap ``trainer.callback_handler`` and wrap ``train``/``training_step`` on the instance."""
    _check_version()
    callback = TraincardCallback(reporter)
    callback.model = trainer.model
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
