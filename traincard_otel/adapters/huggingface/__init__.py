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

from .callback import TraincardCallback
from .taps import MIN_VERSION, TAPPED_EVENTS, HFHandle, attach

__all__ = ["MIN_VERSION", "TAPPED_EVENTS", "HFHandle", "TraincardCallback", "attach"]
