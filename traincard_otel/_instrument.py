"""instrument(obj): find the framework from the object's classes and wire its adapter.

Frameworks are recognised by the top-level module of the object's class hierarchy, so nothing
is imported to check: whoever holds a Trainer has already imported its framework.
"""

from __future__ import annotations

import weakref
from typing import Protocol

from ._configure import configure
from ._safety import warn_once
from ._types import Reported

SUPPORTED = (
    "transformers.Trainer (and subclasses such as trl.SFTTrainer), "
    "lightning.pytorch.Trainer / pytorch_lightning.Trainer, "
    "accelerate.Accelerator, torch.optim.Optimizer (hand-written loops)"
)


class Handle(Protocol):
    """What :func:`instrument` returns: ``close()`` flushes and detaches the adapter."""

    closed: bool

    def close(self) -> None: ...


_instrumented: weakref.WeakKeyDictionary[object, Handle] = weakref.WeakKeyDictionary()


def _roots(obj: object) -> set[str]:
    return {cls.__module__.split(".", 1)[0] for cls in type(obj).__mro__}


def instrument(obj: object, *, model: object = None, **settings: Reported) -> Handle:
    """Report everything ``obj`` (a training framework object) does to the card and OTel.

    Args:
        obj: a ``transformers.Trainer`` (or subclass, such as ``trl.SFTTrainer``), a Lightning
            ``Trainer``, an ``accelerate.Accelerator``, or the ``torch.optim.Optimizer`` of a
            hand-written loop (the handle then has ``log()`` and ``save()``).
        model: for an ``Accelerator`` or an optimizer, the model being trained, so its FLOPs per
            token give the card's MFU (Trainers know their model).
        **settings: passed to :func:`traincard_otel.configure` if telemetry is not set up yet.

    Returns:
        A handle; ``handle.close()`` flushes (also done at exit). Instrumenting the same object
        twice returns the first handle and reports nothing twice; after ``close()`` it attaches again.

    Raises:
        TypeError: ``obj`` is not a supported framework object.
    """
    try:
        existing = _instrumented.get(obj)
    except TypeError:
        existing = None
    if existing is not None and not existing.closed:
        warn_once(f"instrument-twice:{id(obj)}", "traincard: %r is already instrumented", type(obj).__name__)
        return existing
    roots = _roots(obj)
    handle: Handle
    if "transformers" in roots:
        from .adapters.huggingface import attach

        handle = attach(obj, configure(**settings))
    elif roots & {"lightning", "pytorch_lightning"} and hasattr(obj, "fit"):
        from .adapters.lightning import attach as attach_lightning

        handle = attach_lightning(obj, configure(**settings))
    elif "accelerate" in roots and hasattr(obj, "trackers"):
        from .adapters.accelerate import attach as attach_accelerate

        handle = attach_accelerate(obj, configure(**settings), model)
    elif "torch" in roots and hasattr(obj, "register_step_post_hook") and hasattr(obj, "param_groups"):
        from .adapters.torch_loop import attach as attach_loop

        handle = attach_loop(obj, configure(**settings), model)
    else:
        raise TypeError(
            f"traincard_otel.instrument() does not support {type(obj).__qualname__}; supported: {SUPPORTED}"
        )
    _instrumented[obj] = handle
    return handle
