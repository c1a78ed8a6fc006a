"""What the Hugging Face adapter wraps on a Trainer's instances: the callback handler's events,
``training_step`` (the batches' samples, tokens and data wait) and ``train`` (the failure)."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Protocol

from .._safety import internal_error
from .._types import Foreign
from .._write.report.reporter import Reporter

#: A method of the Trainer's callback handler, called with (args, state, control).
HandlerEvent = Callable[..., Foreign]

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


class Events(Protocol):
    """The adapter's callback, as the wrappers see it: the current step's counts, and its hooks."""

    samples: int
    tokens: int
    data_wait: float | None
    last_step_end: float | None

    def tap_step_end(self, original: HandlerEvent) -> HandlerEvent: ...

    def report_logged(self) -> None: ...


def tap(handler: Foreign, event: str, callback: Events) -> HandlerEvent:
    """``handler.<event>`` that calls the callback's hook after the registered callbacks."""
    original = getattr(handler, event)
    if event == "on_step_end":
        return callback.tap_step_end(original)
    hook = getattr(callback, event)

    def tapped(*args: object) -> object:  # the events of a run's start, end, epochs, evals and saves
        control = original(*args)
        hook(*args)
        return control

    return tapped


def agreement(trainer: Foreign) -> Callable[[bool], bool]:
    """Every rank must stop at the same step, or the next collective hangs; only the ranks that
    judge the metrics see an anomaly. So with ``stop_on`` armed in a multi-rank run the ranks' flags
    are summed at each step end: one all-reduce of one number (the Trainer's own loss logging
    synchronises as much)."""
    import torch

    def agree(flag: bool) -> bool:
        mine = torch.tensor([1.0 if flag else 0.0], device=trainer.args.device)
        return bool(trainer.accelerator.reduce(mine, reduction="sum").item() > 0)

    return agree


def counting_step(step_fn: Callable[..., Foreign], callback: Events) -> Callable[..., Foreign]:
    """``trainer.training_step`` that counts each micro-batch's samples and tokens on ``callback``,
    and the time the step waited for its batches (at its first micro-batch)."""
    perf_counter = time.perf_counter

    @functools.wraps(step_fn)
    def training_step(model: object, inputs: object, *rest: object, **kwargs: object) -> object:
        # Inline rather than in a method: this runs once per micro-batch, on the step's cold caches.
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

    return training_step


def reporting_failure(
    train_fn: Callable[..., Foreign], trainer: Foreign, callback: Events, reporter: Reporter
) -> Callable[..., Foreign]:
    """``trainer.train`` that reports the exception training raised (with the last metrics)."""

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

    return train
