"""autolog(): every Trainer, Lightning Trainer and Accelerator made from now on is instrumented.

Each framework's class gets its ``__init__`` wrapped: once the object is built, it goes through
:func:`traincard_otel.instrument`, the same door as a call in the training code, so an object
that is also instrumented by hand (or through a callback passed to it) is reported once. A
framework imported already is patched at once; one imported later is patched when its module
has run (a finder on ``sys.meta_path``, as MLflow's autolog does): nothing is imported here.

Two owners may hold the hooks: the user's ``autolog()`` and the ``@traincard`` decorator (for
the step it runs); they stay until both have let go.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

from ._instrument import instrument
from ._safety import internal_error
from ._types import Foreign, Reported
from .adapters._registry import calling_object, checked_settings, framework_roots
from .exceptions import TraincardError

__all__ = ["PATCHED_CLASSES", "autolog", "hold", "release"]

#: The module of each class patched, and the class.
PATCHED_CLASSES = {
    "transformers.trainer": "Trainer",
    "lightning.pytorch.trainer.trainer": "Trainer",
    "pytorch_lightning.trainer.trainer": "Trainer",
    "accelerate.accelerator": "Accelerator",
}

Init = Callable[..., None]

_lock = threading.RLock()
_owners: set[str] = set()
_settings: dict[str, Reported] = {}
_patched: dict[str, tuple[type, Init, Init]] = {}  # module -> (class, its own __init__, ours)


def autolog(*, disable: bool = False, **settings: Reported) -> None:
    """Instrument every ``transformers.Trainer`` (TRL's and PEFT models' included), Lightning
    ``Trainer`` (``lightning.pytorch`` and ``pytorch_lightning``) and ``accelerate.Accelerator``
    made after this call, including those of frameworks imported after it.

    An object also passed to :func:`traincard_otel.instrument`, or given one of
    :mod:`traincard_otel.integrations`' callbacks, is reported once. An ``Accelerator`` that a
    Trainer makes for itself is the Trainer's, not instrumented apart.

    Args:
        disable: undo an earlier ``autolog()``: objects made afterwards are left alone (those
            instrumented already keep reporting until ``shutdown()``).
        **settings: passed to :func:`traincard_otel.configure` when the first object is
            instrumented.

    Raises:
        TypeError: a setting ``configure`` does not take.
    """
    if disable:
        release("autolog")
    else:
        hold("autolog", checked_settings(settings))


def hold(owner: str, settings: dict[str, Reported] | None = None) -> None:
    """Install the hooks for ``owner`` (``"autolog"``, or the decorator's step)."""
    with _lock:
        if settings is not None:
            _settings.clear()
            _settings.update(settings)
        _owners.add(owner)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
        for name in PATCHED_CLASSES:
            module = sys.modules.get(name)
            if module is not None:
                _patch(module)


def release(owner: str) -> None:
    """Let go of the hooks for ``owner``; once no owner holds them, each class gets its own
    ``__init__`` back (unless something wrapped it after us: ours then does nothing)."""
    with _lock:
        _owners.discard(owner)
        if _owners:
            return
        if _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
        for cls, own, ours in _patched.values():
            if vars(cls).get("__init__") is ours:
                cls.__init__ = own  # type: ignore[misc]
        _patched.clear()


def _patch(module: ModuleType) -> None:
    with _lock:
        cls = getattr(module, PATCHED_CLASSES[module.__name__], None)
        if not _owners or module.__name__ in _patched or not isinstance(cls, type):
            return
        own = vars(cls).get("__init__")
        if own is None:
            return
        ours = _instrumenting(own)
        cls.__init__ = ours  # type: ignore[misc]
        _patched[module.__name__] = (cls, own, ours)


def _instrumenting(own: Init) -> Init:
    @functools.wraps(own)
    def __init__(self: object, *args: object, **kwargs: object) -> None:
        own(self, *args, **kwargs)
        if _owners:
            _instrument_new(self)

    return __init__


def _instrument_new(obj: object) -> None:
    try:
        if "accelerate" in framework_roots(obj) and _made_by_a_trainer(obj):
            return
        instrument(obj, **_settings)
    except TraincardError:  # misconfiguration (a setting, a framework version): say so at start
        raise
    except Exception as exc:
        internal_error("autolog", exc)


def _made_by_a_trainer(accelerator: object) -> bool:
    """Whether a Hugging Face Trainer made ``accelerator`` (for itself, in its ``__init__`` or a
    hyperparameter search): the nearest method up the stack whose ``self`` is not the
    Accelerator belongs to a Trainer."""
    maker = calling_object(lambda obj: True, skip=accelerator, depth=8)
    return maker is not None and "transformers" in framework_roots(maker)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module in :data:`PATCHED_CLASSES`, it asks the finders after it
    and has the module's loader patch the class once the module's code has run."""

    def __init__(self) -> None:
        self._finding = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in PATCHED_CLASSES or getattr(self._finding, "name", None) == fullname:
            return None
        self._finding.name = fullname  # importlib.util.find_spec asks every finder, us included
        try:
            spec = importlib.util.find_spec(fullname)
        except Exception:  # the import that follows raises its own error
            return None
        finally:
            self._finding.name = None
        loader: Foreign = spec.loader if spec is not None else None
        attributes = getattr(loader, "__dict__", None)  # the loader's own, set on its instance
        if attributes is None or "exec_module" in attributes or not hasattr(loader, "exec_module"):
            return None
        own: Callable[[ModuleType], None] = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                own(module)
            finally:
                attributes.pop("exec_module", None)  # the loader is the module's own: put back
            try:
                _patch(module)
            except Exception as exc:  # the framework itself must import
                internal_error("autolog patch", exc)

        loader.exec_module = exec_module
        return spec


_FINDER = _PostImportFinder()
