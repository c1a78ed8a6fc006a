"""The process's one pipeline: started on first use, refused with other settings, shut down once."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Mapping

from ... import _config
from ..._identity import MetaflowIdentity, detect_metaflow, detect_rank
from ..._store.backends import Backend
from ..._types import Reported
from ...exceptions import ConfigError
from ..store.where import resolve_backend
from . import children, process_exit
from .builder import build_pipeline
from .lifecycle import Pipeline

logger = logging.getLogger("traincard_otel")
_lock = threading.RLock()
_active: Pipeline | None = None
_fork_hook = False


def active() -> Pipeline | None:
    """The running pipeline of this process, if any."""
    pipeline = _active
    return pipeline if pipeline is not None and not pipeline.closed else None


def _metaflow_datastore(mf: MetaflowIdentity) -> MetaflowIdentity:
    """Fill the task's datastore type and root from its metadata (public client API)."""
    if mf.ds_type and mf.ds_root:
        return mf
    from metaflow import current

    task = current.task
    if task is None:
        return mf
    md = task.metadata_dict
    return dataclasses.replace(mf, ds_type=md.get("ds-type"), ds_root=md.get("ds-root"))


def _check_same(
    running: Pipeline, settings: Mapping[str, object], resolved: _config.Settings, backend: Backend | None
) -> None:
    """Settings given again must be the running pipeline's: a silent mismatch hides a mistake."""
    for name, value in settings.items():
        if value is None:
            continue
        old, new = getattr(running.settings, name), getattr(resolved, name)
        if old != new:
            raise ConfigError(
                f"traincard is already running with {name}={running.settings.redacted(name)!r}, and was "
                f"asked for {name}={resolved.redacted(name)!r}; "
                "call traincard_otel.shutdown() first to change settings, or leave the setting out"
            )
    if backend is not None and running.backend is not None and backend.spec != running.backend.spec:
        raise ConfigError(
            f"traincard is already writing to {running.backend.spec!r}, and was asked to write to "
            f"{backend.spec!r}; call traincard_otel.shutdown() first"
        )


def start(
    *,
    backend: Backend | None = None,
    metaflow_identity: MetaflowIdentity | None = None,
    **settings: Reported,
) -> Pipeline | None:
    """The running pipeline, started with ``settings`` if there is none (None when disabled).

    Raises:
        ConfigError: a setting is unknown or invalid, or differs from the running pipeline's.
    """
    global _active
    with _lock:
        resolved = _config.resolve(settings)
        running = active()
        if running is not None:
            _check_same(running, settings, resolved, backend)
            return running
        if resolved.sdk_disabled:
            return None
        parent = None if metaflow_identity is not None else children.parent_pid()
        if parent is not None:  # a Metaflow task is never a child: @traincard names it
            logger.debug("traincard: pid %d is a child of pid %d, which reports for it", os.getpid(), parent)
            return None
        mf = metaflow_identity or detect_metaflow()
        if mf is not None and backend is None and not resolved.store:
            mf = _metaflow_datastore(mf)
        if backend is None:
            backend = resolve_backend(resolved, mf)
        _watch_forks()
        _active = build_pipeline(resolved, mf=mf, rank=detect_rank(), backend=backend).start()
        process_exit.install(active)
        children.claim()
        return _active


def _watch_forks() -> None:
    """Registered before the first pipeline's OTel SDK registers its own hooks, so it runs first."""
    global _fork_hook
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook = True


def _after_fork_in_child() -> None:
    """A forked child: the copy of the parent's pipeline is the parent's, and stays silent here."""
    global _active, _lock
    _lock = threading.RLock()  # another thread may have held it at the fork
    children.after_fork_in_child()
    process_exit.leave_to_parent()
    inherited, _active = _active, None
    if inherited is not None:
        inherited.leave_to_parent()


def shutdown(timeout_s: float | None = None) -> None:
    """Flush and stop telemetry for this process (bounded). Safe to call more than once."""
    pipeline = active()
    if pipeline is not None:
        pipeline.shutdown(timeout_s)
