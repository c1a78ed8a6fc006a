"""Hand-written PyTorch loops: at most three added lines.

    tracker = traincard_otel.instrument(optimizer)      # step ends and step time, from optimizer.step()
    ...
    tracker.log(loss=loss, batch=batch)                 # metrics, and throughput from the batch
    tracker.save(model.state_dict(), "ckpt/step-1000.pt")  # torch.save + the checkpoint record

``instrument(optimizer, model=model)`` also reports the model's FLOPs per token, so the card shows
MFU (with the throughput ``log(batch=...)`` measures), at the precision of the first forward's
``torch.autocast`` if one is on, else of the model's parameters, and times each step's forward,
backward and gradient communication for the step anatomy (:mod:`._anatomy`; the optimizer is timed
with or without ``model=``, and the data part is the time before a step's first forward). For
grad-norm, use :func:`track` with ``model=`` and ``grad_norm_every=``: the norm is computed as a tensor before
``optimizer.step()`` and converted off the training thread (no extra CUDA sync there).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from .._analysis.flops import model_fields
from .._optional import require
from .._safety import guarded
from .._types import Foreign, Reported
from .._write.report.reporter import Reporter
from ._anatomy import install as install_anatomy

torch = require("torch", "torch")
_AUTOCAST = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def _batch_counts(batch: object) -> tuple[int | None, int | None]:
    """(samples, tokens) of a batch: the leading dimension, and the element count of token ids."""
    if isinstance(batch, Mapping):
        ids = batch.get("input_ids")
        if ids is not None and getattr(ids, "ndim", 0) >= 2:
            return int(ids.shape[0]), int(ids.numel())
        batch = next(iter(batch.values()), None)
    if isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    shape = getattr(batch, "shape", None)
    return (int(shape[0]), None) if shape is not None and len(shape) >= 1 else (None, None)


class LoopTracker:
    """Reports a raw loop through optimizer hooks; see the module docstring."""

    def __init__(
        self, optimizer: Foreign, reporter: Reporter, *, model: Foreign = None, grad_norm_every: int = 0
    ) -> None:
        self.optimizer, self.reporter = optimizer, reporter
        self.model, self.grad_norm_every = model, grad_norm_every
        self.step = 0
        self._last = time.perf_counter()
        self._pending: tuple[int, float, Reported] | None = None
        self.anatomy = install_anatomy(reporter, model=model)
        if self.anatomy is not None:
            self.anatomy.watch_optimizer(optimizer, end=False)  # the end is _after_step's
        self._handles = [optimizer.register_step_post_hook(self._after_step)]
        if model is not None and grad_norm_every > 0:
            self._handles.append(optimizer.register_step_pre_hook(self._before_step))
        self.closed = False  # instrument() attaches afresh once closed
        if model is not None:  # model FLOPs per token, for MFU
            reporter.progress(**model_fields(model))
            if callable(getattr(model, "register_forward_pre_hook", None)):
                self._probe = model.register_forward_pre_hook(self._first_forward)
                self._handles.append(self._probe)

    @guarded("torch_loop.first_forward", None)
    def _first_forward(self, module: object, args: object) -> None:
        """Under ``torch.autocast`` the matrix multiplications run in autocast's dtype, not the
        parameters': read it at the first forward (then the hook is gone) for MFU's peak."""
        self._probe.remove()
        first = next(iter(self.model.parameters()), None)
        device = getattr(getattr(first, "device", None), "type", None)
        if device is not None and torch.is_autocast_enabled(device):
            dtype = _AUTOCAST.get(torch.get_autocast_dtype(device))
            if dtype is not None:
                self.reporter.progress(**model_fields(self.model, dtype))

    @guarded("torch_loop.pre_step", None)
    def _before_step(self, optimizer: object, args: object, kwargs: object) -> None:
        if (self.step + 1) % self.grad_norm_every:
            return
        grads = [p.grad.detach() for p in self.model.parameters() if p.grad is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            self.reporter.metrics({"grad_norm": norm}, step=self.step + 1)  # a tensor: .item() off-thread

    @guarded("torch_loop.post_step", None)
    def _after_step(self, optimizer: object, args: object, kwargs: object) -> None:
        now = time.perf_counter()
        parts = None
        if self.anatomy is not None:  # taken now: the step end waits for log()'s batch
            clock = self.anatomy.clock
            clock.end_optimizer()
            parts = clock.take(self._last)
        self._emit_pending()
        self.step += 1
        self._pending = (self.step, now - self._last, parts)
        self._last = now

    def _emit_pending(self, samples: int | None = None, tokens: int | None = None) -> None:
        if self._pending is not None:
            step, duration, parts = self._pending
            self.reporter.step_end(step, duration_s=duration, samples=samples, tokens=tokens, parts=parts)
            self._pending = None

    @guarded("torch_loop.log", None)
    def log(self, batch: object = None, step: int | None = None, **values: Reported) -> None:
        """Report scalars (floats or tensors) at the current step; ``batch`` gives the throughput."""
        samples, tokens = _batch_counts(batch) if batch is not None else (None, None)
        self._emit_pending(samples, tokens)
        if values:
            self.reporter.metrics(values, step=self.step if step is None else step)

    @property
    def should_stop(self) -> bool:
        """True once an anomaly that ``stop_on`` names was seen (``Reporter.should_stop``)."""
        return self.reporter.should_stop

    def save(self, obj: object, path: str, **metadata: Reported) -> None:
        """``torch.save(obj, path)`` inside a ``save`` phase, recorded as a checkpoint."""
        with self.reporter.phase("save"):
            torch.save(obj, path)
        self.reporter.checkpoint(path, step=self.step, metadata=metadata)

    def close(self) -> None:
        """Remove the hooks and flush."""
        self.closed = True
        self._emit_pending()
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self.anatomy is not None:
            self.anatomy.remove()
        self.reporter.flush()


def track(
    optimizer: Foreign, *, model: Foreign = None, grad_norm_every: int = 0, **settings: Reported
) -> LoopTracker:
    """Track a raw loop driven by ``optimizer`` (configures telemetry if needed)."""
    from .._configure import configure

    return LoopTracker(optimizer, configure(**settings), model=model, grad_norm_every=grad_norm_every)


def attach(optimizer: Foreign, reporter: Reporter, model: Foreign = None) -> LoopTracker:
    return LoopTracker(optimizer, reporter, model=model)
