"""Which framework objects are instrumented, whichever door attached them (docs/integrations.md).

``instrument()``, ``autolog()``, ``@traincard``, the OpenTelemetry instrumentor and the frameworks'
own callback and tracker classes all attach the same adapter; this registry makes the first door
to reach a Trainer or an Accelerator the only one. Objects are told apart by identity (a
framework class may define ``__eq__``) and held weakly (a registry must not keep a Trainer alive).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Protocol, TypeVar

from .._configure import configure
from .._types import Foreign, Reported


class Handle(Protocol):
    """What an adapter's ``attach`` returns: ``close()`` flushes and detaches the adapter."""

    closed: bool

    def close(self) -> None: ...


H = TypeVar("H", bound=Handle)

_lock = threading.RLock()  # re-entrant: a framework object may be made while another attaches
_handles: dict[int, tuple[Callable[[], object], Handle]] = {}


def instrumented(obj: object) -> Handle | None:
    """The open handle of ``obj`` (None: no door has attached an adapter to it, or it was closed)."""
    entry = _handles.get(id(obj))
    if entry is None or entry[0]() is not obj or entry[1].closed:
        return None
    return entry[1]


def claim(obj: object, attach: Callable[[], H]) -> Handle:
    """The open handle of ``obj``, else ``attach()``'s, recorded as it (atomically: two doors
    reaching one object at once attach one adapter)."""
    with _lock:
        existing = instrumented(obj)
        if existing is not None:
            return existing
        handle = attach()
        key = id(obj)
        try:
            ref: Callable[[], object] = weakref.ref(obj, functools.partial(_forget, _handles, key))
        except TypeError:  # not weakly referable: held for the life of the process
            ref = lambda: obj  # noqa: E731
        _handles[key] = (ref, handle)
        return handle


def _forget(handles: dict[int, tuple[Callable[[], object], Handle]], key: int, dead: object) -> None:
    # The dict comes bound: at interpreter exit the module's globals may be gone before the objects.
    entry = handles.get(key)
    if entry is not None and entry[0] is dead:
        handles.pop(key, None)


def calling_object(accept: Callable[[object], bool], *, skip: object = None, depth: int = 12) -> Foreign:
    """The ``self`` of the nearest method up the caller's stack that ``accept`` takes (None if none
    within ``depth`` frames); frames whose ``self`` is ``skip`` are passed over.

    A framework calls its callbacks and trackers without saying whose they are; the object that
    dispatches the event (a Trainer's ``__init__``, an ``Accelerator.log``) is a few frames up.
    Read once per callback, when it binds.
    """
    frame: FrameType | None = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            break
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self":
            candidate = frame.f_locals.get("self")
            if candidate is not None and candidate is not skip and accept(candidate):
                return candidate
        frame = frame.f_back
    return None


def checked_settings(settings: dict[str, Reported]) -> dict[str, Reported]:
    """``settings`` for :func:`traincard_otel.configure`, given to a callback or tracker now and used
    when it binds: a name ``configure`` does not take raises ``TypeError`` here, at start."""
    inspect.signature(configure).bind(**settings)
    return settings


def framework_roots(obj: object) -> set[str]:
    """The top-level modules of ``obj``'s class hierarchy (``transformers``, ``lightning`` ...):
    which framework an object belongs to, with nothing imported to check."""
    return {cls.__module__.split(".", 1)[0] for cls in type(obj).__mro__}
