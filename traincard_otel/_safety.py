"""Internal-error policy: telemetry must never stop training.

Errors inside callbacks, background threads and exporters are logged once per call site and
swallowed, except under pytest (``PYTEST_CURRENT_TEST`` set), where they are re-raised so that
tests see the bug.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

logger = logging.getLogger("traincard_otel")

P = ParamSpec("P")
R = TypeVar("R")

_seen: set[str] = set()
_seen_lock = threading.Lock()


def warn_once(key: str, message: str, *args: object) -> None:
    """Log ``message`` at WARNING level the first time ``key`` is seen in this process."""
    with _seen_lock:
        if key in _seen:
            return
        _seen.add(key)
    logger.warning(message, *args)


def under_pytest() -> bool:
    return "PYTEST_CURRENT_TEST" in os.environ


def report_internal_error(where: str, exc: BaseException) -> None:
    """Log an internal error once per ``where``; training continues."""
    with _seen_lock:
        first = where not in _seen
        _seen.add(where)
    if first:
        logger.warning(
            "traincard internal error in %s; training continues with less telemetry", where, exc_info=exc
        )


def internal_error(where: str, exc: Exception) -> None:
    """Apply the policy to an exception caught at ``where``: re-raised under pytest, else logged once."""
    if under_pytest():
        raise exc
    report_internal_error(where, exc)


def guarded(
    where: str, default: R, *, passes: tuple[type[Exception], ...] = ()
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a hook so that an exception is reported and ``default`` returned instead; one of
    ``passes`` (a set-up error that must stop the program, say) is raised as it is."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except passes:
                raise
            except Exception as exc:
                internal_error(where, exc)
                return default

        return inner

    return wrap
