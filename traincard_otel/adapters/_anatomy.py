"""The step anatomy's hooks, shared by the adapters: they time each step's forward, backward,
optimizer and communication into the reporter's :class:`~traincard_otel._write.queue.PartClock`.

* forward: the root module's ``forward`` wrapped on the instance (only while autograd records: an
  evaluation's forward is no training step's), or the framework's own hooks (Lightning). A wrapper
  rather than the module's forward pre and post hooks: hooks take every call of the root module
  off ``nn.Module.__call__``'s fast path into its general one, 15.5 k instructions a step where
  the wrapper costs nothing the count can tell (``benchmarks/bench_anatomy.py --mechanisms``);
* backward: where no ``torch.distributed`` process group exists, the call that makes the backward
  is timed around it, with no hook inside autograd: the framework's own (``Accelerator.backward``,
  which HF's Trainer calls too; Lightning's ``on_before_backward``/``on_after_backward``), or in a
  raw loop ``torch.autograd.backward``, which ``loss.backward()`` calls. Otherwise (any run with a
  process group, or a backward made another way, as ``torch.autograd.grad``) a hook on the
  forward's output (its ``loss`` where it has one) fires when backward reaches it, which is where
  backward starts; from there an autograd callback marks the end of the graph, and where a process
  group exists a second one, queued from the first, runs after every callback queued during
  backward, among them DDP's and FSDP's end-of-backward wait for the gradients' collectives: the
  time between the two is communication, the time the rank was blocked waiting for the others
  (without a process group there are no collectives to wait for: communication is 0);
* optimizer: the optimizer's step pre and post hooks.

On a GPU the same marks record CUDA events on the current stream instead of reading the host
clock (:class:`DeviceClock`); the converter reads their elapsed times off the training thread, so
the training thread never synchronises. Every hook only writes plain attributes; none raises into
training (an internal error is logged once, re-raised under pytest).
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from .._optional import require
from .._safety import internal_error
from .._types import Foreign, Reported
from .._write.queue import NAN, PartClock
from .._write.report.reporter import Reporter

torch = require("torch", "torch")
Tensor = torch.Tensor

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
        self.grouped: Callable[[], bool] = dist.is_initialized if dist.is_available() else bool
        # bound once: a bound method made at every backward is an allocation on the training thread
        self._hook, self._done, self._done_alone = self._started, self._graph_done, self._graph_done_alone
        self._last = self._collectives_done
        self._direct = True  # hooks registered as Tensor.register_hook does inside (see arm())

    def arm(self, tensor: Foreign) -> None:
        """Mark the backward pass that reaches ``tensor`` (a tensor that requires grad).

        ``Tensor.register_hook``'s own two steps, a hooks dict on the tensor registered with the
        node that made it, without the handle it builds in Python: 10.2 k instructions a step
        (registered and called) where ``node.register_prehook`` costs 16.1 k and ``register_hook``
        26.5 k (both make a ``RemovableHandle``, which nothing here removes; ``bench_anatomy
        --mechanisms``). A tensor that has hooks already, a tensor subclass, or a torch without
        those steps gets the pre-hook on its node; a leaf, a tensor hook."""
        node = tensor.grad_fn
        if node is None:
            tensor.register_hook(self._hook)
        elif self._direct and type(tensor) is Tensor and tensor._backward_hooks is None:
            try:
                tensor._backward_hooks = OrderedDict({-1: self._hook})  # (handles' ids are >= 0)
                node._register_hook_dict(tensor)
            except (AttributeError, TypeError):  # not in this torch: the public way from now on
                self._direct = False
                tensor._backward_hooks = None
                node.register_prehook(self._hook)
        else:
            node.register_prehook(self._hook)

    def _started(self, grad: Foreign) -> None:
        try:
            self.clock.begin_backward()
            self._queue_callback(self._done if self.grouped() else self._done_alone)
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
            self._queue_callback(self._last)  # runs after DDP's and FSDP's own callbacks
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


_ABSENT = object()


class Anatomy:
    """The hooks and wrappers one adapter installed; :meth:`remove` takes them out."""

    def __init__(self, clock: PartClock) -> None:
        self.clock = clock
        self.marks = BackwardMarks(clock)
        # A framework call that is the backward is wrapped (bracket_backward) and has been made:
        # without a process group, the forward's output is not armed (no hook inside autograd). Set
        # at its first call, so a Trainer whose own training_step never makes it keeps the hooks.
        self.bracketed = False
        self.handles: list[Foreign] = []
        self._wrapped: list[tuple[Foreign, str, Foreign, object]] = []  # (object, name, wrapper, previous)
        self._on = [True]  # the wrappers' switch: one wrapped over by another cannot always be taken out

    def measure(self, measured: Measured) -> None:
        """Add ``measured`` to the parts the clock says are timed (several adapters may share it)."""
        self.clock.measured = tuple(a or b for a, b in zip(self.clock.measured, measured, strict=True))  # type: ignore[assignment]

    def _wrap(self, obj: Foreign, name: str, wrapper: Callable[..., Foreign]) -> None:
        self._wrapped.append((obj, name, wrapper, vars(obj).get(name, _ABSENT)))
        setattr(obj, name, wrapper)

    def watch_forward(self, model: Foreign) -> None:
        """Time the root module's forwards that autograd records, and the backward from their output."""
        inner: Callable[..., Foreign] = model.forward
        clock, marks, recording, on = self.clock, self.marks, torch.is_grad_enabled, self._on

        # (__wrapped__: inspect.signature(model.forward), as the Trainer reads it, is unchanged)
        @functools.wraps(inner)
        def forward(*args: Foreign, **kwargs: Foreign) -> Foreign:
            if not (on[0] and recording()):
                return inner(*args, **kwargs)
            try:
                clock.begin_forward()
            except Exception as exc:
                internal_error("anatomy.forward", exc)
            output = inner(*args, **kwargs)
            try:
                clock.end_forward()
                if not self.bracketed or marks.grouped():
                    tensor = grad_tensor(output)
                    if tensor is not None:
                        marks.arm(tensor)
            except Exception as exc:
                internal_error("anatomy.forward_end", exc)
            return output

        self._wrap(model, "forward", forward)
        self.measure((True, True, True, False, True))

    def bracket_backward(self, obj: Foreign, name: str = "backward") -> None:
        """Time ``obj.<name>(...)`` (a framework's own backward call, ``Accelerator.backward``, or
        ``torch.autograd.backward``) as the backward where no process group exists; with one, the
        output's hooks time it. Only the outermost call marks: reentrant activation checkpointing
        runs a backward inside the backward."""
        inner: Callable[..., Foreign] = getattr(obj, name)
        clock, grouped, on = self.clock, self.marks.grouped, self._on
        depth = [0]  # calls under way: a backward made inside one (reentrant checkpointing's) is its own

        @functools.wraps(inner)
        def backward(*args: Foreign, **kwargs: Foreign) -> Foreign:
            if not on[0] or depth[0] or grouped():
                return inner(*args, **kwargs)
            try:
                clock.begin_backward()  # (a backward the output's hook marks too: marked once)
                self.bracketed = True
            except Exception as exc:
                internal_error("anatomy.backward", exc)
            depth[0] += 1
            try:
                result = inner(*args, **kwargs)
            finally:
                depth[0] -= 1
            try:
                clock.end_backward(collectives=False)
            except Exception as exc:
                internal_error("anatomy.backward_end", exc)
            return result

        self._wrap(obj, name, backward)

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
        for obj, name, wrapper, previous in reversed(self._wrapped):
            if vars(obj).get(name) is not wrapper:
                continue  # wrapped over since: switched off below instead
            if previous is _ABSENT:
                delattr(obj, name)
            else:
                setattr(obj, name, previous)
        self._wrapped = []
        self._on[0] = False
        self._on = [True]  # for what this anatomy installs next
        self.bracketed = False


def clock_for(reporter: Reporter, model: Foreign = None) -> Anatomy | None:
    """The hooks' holder on the reporter's clock (a device clock for a model on a GPU), or None
    when the ``anatomy`` setting is off."""
    make: Callable[[Measured], PartClock] = DeviceClock if model is not None and _on_gpu(model) else PartClock
    clock = reporter.part_clock(lambda: make((False,) * 5))
    return Anatomy(clock) if clock is not None else None


def install(
    reporter: Reporter, *, model: Foreign = None, optimizer: Foreign = None, backward: Foreign = None
) -> Anatomy | None:
    """Hooks on ``model`` (forward, backward, communication) and ``optimizer``, and ``backward``'s
    own ``backward`` method (an ``Accelerator``), else ``torch.autograd.backward``, timed as the
    backward; None when off."""
    anatomy = clock_for(reporter, model)
    if anatomy is None:
        return None
    if model is not None and callable(getattr(model, "register_forward_pre_hook", None)):
        anatomy.watch_forward(model)
        # A raw loop's ``loss.backward()`` (a GradScaler's scaled loss's too) goes through
        # ``torch.autograd.backward``, looked up on the module at every call: that is the backward.
        own = callable(getattr(backward, "backward", None))
        anatomy.bracket_backward(backward if own else torch.autograd)
    if optimizer is not None:
        anatomy.watch_optimizer(optimizer)
    return anatomy
