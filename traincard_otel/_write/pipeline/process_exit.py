"""What happens to telemetry when the process ends: at exit, on SIGTERM, on an uncaught exception.

Exit is bounded whatever the exporters do. The final flush runs before ``concurrent.futures``
stops accepting work at interpreter exit: datastore clients (Metaflow's S3 client among them)
submit their writes to executors, and an ``atexit`` handler runs too late for that ("cannot
schedule new futures after interpreter shutdown"), losing the end of a run that simply returns.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Protocol

from .bounded import bounded

_installed = False
_sigterm_installed = False
_terminate_hooks: list[Callable[[], None]] = []
_prev_sigterm: Callable[[int, FrameType | None], object] | int | signal.Handlers | None = None
_prev_excepthook: Callable[[type[BaseException], BaseException, TracebackType | None], object] | None = None


class Exiting(Protocol):
    """What the hooks need of a pipeline (the pipeline module imports this one, not back)."""

    terminated_by: str | None

    def shutdown(self, timeout_s: float | None = None, status: str | None = None) -> None: ...

    def failure(self, exc: BaseException, *, flush: bool = True) -> None: ...


class Exits:
    """What the hooks act on: the running pipeline (looked up when the hook fires)."""

    active: Callable[[], Exiting | None] = staticmethod(lambda: None)


def add_terminate_hook(fn: Callable[[], None]) -> None:
    """Run ``fn`` (bounded) after the flush on SIGTERM, before the process dies of the signal."""
    _terminate_hooks.append(fn)


def _at_exit() -> None:
    pipeline = Exits.active()
    if pipeline is not None:
        pipeline.shutdown()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    pipeline = Exits.active()
    if pipeline is not None:
        pipeline.terminated_by = signal.Signals(signum).name
        pipeline.shutdown(status="terminated")
        for hook in list(_terminate_hooks):
            bounded(hook, 15.0, default=None)
    prev = _prev_sigterm
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def leave_to_parent() -> None:
    """In a forked child: SIGTERM does what it did before the parent installed its handler.

    The child is no rank and has no pipeline of its own, so the handler would only pass the signal
    on; and a ``multiprocessing`` pool worker blocked on its task queue's lock did not always die
    of the SIGTERM that ``Pool.terminate()`` sends it through a Python-level handler (about one
    exit in 17, measured), leaving the parent waiting for it forever."""
    global _sigterm_installed
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            prev = _prev_sigterm
            signal.signal(signal.SIGTERM, prev if prev is not None else signal.SIG_DFL)
            _sigterm_installed = False  # a child that reports as a rank of its own installs it again
    except ValueError:  # not the main thread: nothing to restore from here
        pass


def _on_uncaught(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    pipeline = Exits.active()
    if pipeline is not None:
        pipeline.failure(exc)  # (a KeyboardInterrupt ends it as terminated by SIGINT)
    (_prev_excepthook or sys.__excepthook__)(exc_type, exc, tb)


def install(active: Callable[[], Exiting | None]) -> None:
    """Install the hooks once per process (the SIGTERM handler again in a forked child that
    starts a pipeline of its own: :func:`leave_to_parent` took it away); ``active()`` returns the
    pipeline to act on."""
    global _installed, _prev_excepthook
    Exits.active = staticmethod(active)
    if _installed:
        _install_sigterm()
        return
    _installed = True
    # Imported first so that its own exit hook is registered before ours: threading runs these
    # hooks in reverse order, so ours runs while executors still take work. The process pool module
    # too: it registers such a hook when first imported, which raises ("can't register atexit after
    # shutdown") if that import happens inside our hook, as a first write through Metaflow's
    # datastore code (which imports it) does when a run returns before its first flush.
    import concurrent.futures.process
    import concurrent.futures.thread  # noqa: F401

    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(_at_exit)
    atexit.register(_at_exit)  # also covers exits that skip threading's hooks (and is a no-op after)
    _prev_excepthook, sys.excepthook = sys.excepthook, _on_uncaught
    _install_sigterm()


def _install_sigterm() -> None:
    global _prev_sigterm, _sigterm_installed
    if not _sigterm_installed and threading.current_thread() is threading.main_thread():
        _prev_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
        _sigterm_installed = True
