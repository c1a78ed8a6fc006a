"""The step anatomy's hooks, shared by the adapters: they time each step's forward, backward,
optimizer and communication into the reporter's :class:`~traincard_otel._write.queue.PartClock`.

* forward: pre and post hooks on the root module (only while autograd records: an evaluation's
  forward is no training step's), or the framework's own hooks (Lightning);
* backward: a hook on the forward's output (its ``loss`` where it has one) fires when backward
  reaches it, which is where backward starts; from there an autograd callback marks the end of
  the graph, and where ``torch.distributed`` has a process group a second one, queued from the
  first, runs after every callback queued during backward, among them DDP's and FSDP's
  end-of-backward wait for the gradients' collectives: the time between the two is
  communication, the time the rank was blocked waiting for the others (without a process group
  there are no collectives to wait for: communication is 0, and the second callback is spared);
* optimizer: the optimizer's step pre and post hooks.

On a GPU the same marks record CUDA events on the current stream instead of reading the host
clock (:class:`DeviceClock`); the converter reads their elapsed times off the training thread, so
the training thread never synchronises. Every hook only writes plain attributes; none raises into
training (an internal error is logged once, re-raised under pytest).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from .._optional import require
from .._safety import internal_error
from .._types import Foreign, Reported
from .._write.queue import NAN, PartClock
from .._write.report.reporter import Reporter

torch = require("torch", "torch")

Measured = tuple[bool, bool, bool, bool, bool]
EVERY_PART: Measured = (True, True, True, True, True)


def grad_tensor(output: Foreign) -> Foreign:
    """The tensor of a forward's output that backward starts from (or reaches first): its
    ``loss`` when it has one, else the first tensor that requires grad; None if there is none."""
    if isinstance(output, torch.Tensor):
        return output if output.requires_grad else None
    if isinstance(output, Mapping):
        loss = output.get("loss")
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            return loss
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return next((t for t in output if isinstance(t, torch.Tensor) and t.requires_grad), None)
    return None


class BackwardMarks:
    """Marks backward's start, the end of its graph and the end of the collectives waited for
    after it (see the module docstring), from a hook armed on a forward's output."""

    def __init__(self, clock: PartClock) -> None:
        self.clock = clock
        self._queue_callback = torch.autograd.Variable._execution_engine.queue_callback
        dist = torch.distributed
        # read at every backward: a process group may be made after the hooks are installed
        self._grouped: Callable[[], bool] = dist.is_initialized if dist.is_available() else bool

    def arm(self, tensor: Foreign) -> None:
        """Mark the backward pass that reaches ``tensor`` (a tensor that requires grad): a pre-hook
        on the node that made it (a third cheaper than a tensor hook), or a tensor hook on a leaf."""
        node = tensor.grad_fn
        if node is not None:
            node.register_prehook(self._started)
        else:
            tensor.register_hook(self._started)

    def _started(self, grad: Foreign) -> None:
        try:
            self.clock.begin_backward()
            self._queue_callback(self._graph_done if self._grouped() else self._graph_done_alone)
        except Exception as exc:
            internal_error("anatomy.backward", exc)

    def _graph_done_alone(self) -> None:
        try:
            self.clock.end_backward(collectives=False)
        except Exception as exc:
            internal_error("anatomy.backward_end", exc)

    def _graph_done(self) -> None:
        try:
            self.clock.end_backward()
            self._queue_callback(self._collectives_done)  # runs after DDP's and FSDP's own callbacks
        except Exception as exc:
            internal_error("anatomy.backward_end", exc)

    def _collectives_done(self) -> None:
        try:
            self.clock.end_communication()
        except Exception as exc:
            internal_error("anatomy.communication", exc)


class DeviceParts:
    """One step's parts as CUDA event pairs, read as seconds off the training thread."""

    def __init__(self, data: float, pairs: list[list[tuple[Foreign, Foreign]]], measured: Measured) -> None:
        self.data, self.pairs, self.measured = data, pairs, measured

    def seconds(self) -> tuple[float, ...]:
        """The converter's thread waits for the step's last event here (never the training thread)."""
        out = [self.data]
        for measured, pairs in zip(self.measured[1:], self.pairs, strict=True):
            total = 0.0
            for start, end in pairs:
                end.synchronize()
                total += start.elapsed_time(end) / 1000.0
            out.append(total if measured else NAN)
        return tuple(out)


class DeviceClock(PartClock):
    """A :class:`PartClock` that times forward, backward, optimizer and communication on the GPU:
    each mark records a CUDA event on the current stream; the data wait stays on the host clock."""

    __slots__ = ("_backward", "_communication", "_forward", "_open", "_optimizer")

    def __init__(self, measured: Measured = EVERY_PART) -> None:
        super().__init__(measured)
        self._forward: list[tuple[Foreign, Foreign]] = []
        self._backward: list[tuple[Foreign, Foreign]] = []
        self._optimizer: list[tuple[Foreign, Foreign]] = []
        self._communication: list[tuple[Foreign, Foreign]] = []
        self._open: dict[str, Foreign] = {}

    @staticmethod
    def _event() -> Foreign:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def begin_forward(self) -> None:
        if not self.first_forward:
            self.first_forward = time.perf_counter()
        self._open["forward"] = self._event()

    def end_forward(self) -> None:
        start = self._open.pop("forward", None)
        if start is not None:
            self._forward.append((start, self._event()))

    def begin_backward(self) -> None:
        if "backward" not in self._open:  # a second output of the same backward reached: it began already
            self._open["backward"] = self._event()

    def end_backward(self, collectives: bool = True) -> None:
        start = self._open.pop("backward", None)
        if start is not None:
            end = self._event()
            self._backward.append((start, end))
            if collectives:
                self._open["communication"] = end

    def end_communication(self) -> None:
        start = self._open.pop("communication", None)
        if start is not None:
            self._communication.append((start, self._event()))

    def begin_optimizer(self) -> None:
        self._open["optimizer"] = self._event()

    def end_optimizer(self) -> None:
        start = self._open.pop("optimizer", None)
        if start is not None:
            self._optimizer.append((start, self._event()))

    def take(self, start: float, data_wait: float | None = None) -> Reported:
        if data_wait is None:
            first = self.first_forward
            data_wait = first - start if self.measured[0] and first >= start else math.nan
        pairs = [self._forward, self._backward, self._optimizer, self._communication]
        self._forward, self._backward, self._optimizer, self._communication = [], [], [], []
        self._open = {}
        self.first_forward = 0.0
        return DeviceParts(data_wait, pairs, self.measured)


def _on_gpu(model: Foreign) -> bool:
    first = next(iter(model.parameters()), None) if callable(getattr(model, "parameters", None)) else None
    return first is not None and getattr(first.device, "type", None) == "cuda"


class Anatomy:
    """The hooks one adapter installed; :meth:`remove` takes them out."""

    def __init__(self, clock: PartClock) -> None:
        self.clock = clock
        self.marks = BackwardMarks(clock)
        self.handles: list[Foreign] = []

    def measure(self, measured: Measured) -> None:
        """Add ``measured`` to the parts the clock says are timed (several adapters may share it)."""
        self.clock.measured = tuple(a or b for a, b in zip(self.clock.measured, measured, strict=True))  # type: ignore[assignment]

    def watch_forward(self, model: Foreign) -> None:
        """Time the root module's forwards that autograd records, and the backward from their output."""
        clock, marks, recording = self.clock, self.marks, torch.is_grad_enabled

        def before(module: object, args: object) -> None:
            try:
                if recording():
                    clock.begin_forward()
            except Exception as exc:
                internal_error("anatomy.forward", exc)

        def after(module: object, args: object, output: object) -> None:
            try:
                if recording():
                    clock.end_forward()
                    tensor = grad_tensor(output)
                    if tensor is not None:
                        marks.arm(tensor)
            except Exception as exc:
                internal_error("anatomy.forward_end", exc)

        self.handles += [model.register_forward_pre_hook(before), model.register_forward_hook(after)]
        self.measure((True, True, True, False, True))

    def watch_optimizer(self, optimizer: Foreign, *, end: bool = True) -> None:
        """Time the optimizer's steps (``end=False``: the caller marks the end itself)."""
        inner: Foreign = getattr(optimizer, "optimizer", optimizer)  # Accelerate's (and so HF's) wrapper
        if not callable(getattr(inner, "register_step_pre_hook", None)):
            return
        clock = self.clock
        self.handles.append(inner.register_step_pre_hook(lambda opt, args, kwargs: clock.begin_optimizer()))
        if end:
            self.handles.append(
                inner.register_step_post_hook(lambda opt, args, kwargs: clock.end_optimizer())
            )
        self.measure((False, False, False, True, False))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def clock_for(reporter: Reporter, model: Foreign = None) -> Anatomy | None:
    """The hooks' holder on the reporter's clock (a device clock for a model on a GPU), or None
    when the ``anatomy`` setting is off."""
    make: Callable[[Measured], PartClock] = DeviceClock if model is not None and _on_gpu(model) else PartClock
    clock = reporter.part_clock(lambda: make((False,) * 5))
    return Anatomy(clock) if clock is not None else None


def install(reporter: Reporter, *, model: Foreign = None, optimizer: Foreign = None) -> Anatomy | None:
    """Hooks on ``model`` (forward, backward, communication) and ``optimizer``; None when off."""
    anatomy = clock_for(reporter, model)
    if anatomy is None:
        return None
    if model is not None and callable(getattr(model, "register_forward_pre_hook", None)):
        anatomy.watch_forward(model)
    if optimizer is not None:
        anatomy.watch_optimizer(optimizer)
    return anatomy
