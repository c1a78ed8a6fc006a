"""instrument(obj): find the framework from the object's classes and wire its adapter.

Frameworks are recognised by the top-level module of the object's class hierarchy, so nothing
is imported to check: whoever holds a Trainer has already imported its framework. Every door
(``autolog()``, ``@traincard``, the OpenTelemetry instrumentor, the frameworks' own callback
classes) reaches an object through the same registry, so the first one attaches and the others
get its handle.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._configure import configure
from ._types import Reported
from .adapters._registry import Handle, claim, framework_roots, instrumented

__all__ = ["SUPPORTED", "Handle", "instrument"]

SUPPORTED = (
    "transformers.Trainer (and subclasses such as trl.SFTTrainer), "
    "lightning.pytorch.Trainer / pytorch_lightning.Trainer, "
    "accelerate.Accelerator, torch.optim.Optimizer (hand-written loops)"
)


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
        A handle; ``handle.close()`` flushes (also done at exit). Instrumenting an object again,
        here or through another door (``autolog()``, ``@traincard``, a callback passed to the
        framework), returns the first handle and reports nothing twice; after ``close()`` it
        attaches again.

    Raises:
        TypeError: ``obj`` is not a supported framework object.
        ConfigError: ``settings`` differ from those telemetry is running with.
    """
    existing = instrumented(obj)
    if existing is None:
        return claim(obj, lambda: _attach(obj, model, settings))
    if settings:  # they must agree with the running pipeline's, as on a first call
        configure(**settings)
    use_model = getattr(existing, "use_model", None)
    if model is not None and callable(use_model):
        use_model(model)
    return existing


def _attach(obj: object, model: object, settings: Mapping[str, Reported]) -> Handle:
    roots = framework_roots(obj)
    if "transformers" in roots:
        from .adapters.huggingface import attach

        return attach(obj, settings)
    if roots & {"lightning", "pytorch_lightning"} and hasattr(obj, "fit"):
        from .adapters.lightning import attach as attach_lightning

        return attach_lightning(obj, settings)
    if "accelerate" in roots and hasattr(obj, "trackers"):
        from .adapters.accelerate import attach as attach_accelerate

        return attach_accelerate(obj, settings, model)
    if "torch" in roots and hasattr(obj, "register_step_post_hook") and hasattr(obj, "param_groups"):
        from .adapters.torch_loop import attach as attach_loop

        return attach_loop(obj, configure(**settings), model)
    raise TypeError(
        f"traincard_otel.instrument() does not support {type(obj).__qualname__}; supported: {SUPPORTED}"
    )
