"""load(target): the public reader entry point (a directory, a Metaflow pathspec, or a Task)."""

from __future__ import annotations

import os
import re
from typing import Any

from .exceptions import ConfigError
from .store.backends import Backend, LocalBackend, MetaflowBackend, backend_from_spec
from .store.reader import RunData, read_store

_PATHSPEC = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*/[^/]+/[^/]+/[^/]+$")


def _task_backend(task: Any) -> tuple[Backend, str]:
    """The store of a Metaflow task; a task cloned by ``resume`` points at its origin's store."""
    md = task.metadata_dict
    ds_type, ds_root = md.get("ds-type"), md.get("ds-root")
    if not ds_type or not ds_root:
        raise ConfigError(f"task {task.pathspec} has no datastore metadata (ds-type/ds-root)")
    flow, run, step, task_id = task.pathspec.split("/")
    backend: Backend = MetaflowBackend(ds_type, ds_root, f"{flow}/{run}/{step}/{task_id}/traincard")
    origin = getattr(task, "origin_pathspec", None)
    if origin and not backend.list():
        oflow, orun, ostep, otask = origin.split("/")
        backend = MetaflowBackend(ds_type, ds_root, f"{oflow}/{orun}/{ostep}/{otask}/traincard")
        return backend, origin
    return backend, task.pathspec


def backend_for(target: Any) -> tuple[Backend, str]:
    """Resolve ``target`` (directory, pathspec string, ``metaflow.Task``) to a backend and a title."""
    if isinstance(target, (str, os.PathLike)):
        path = os.fspath(target)
        if re.match(r"^(s3|gs|az|file|metaflow)://", path):  # a store spec, as TRAINCARD_DIR takes
            return backend_from_spec(path), path.rstrip("/").rsplit("/", 1)[-1]
        if os.path.isdir(path):
            inner = os.path.join(path, "traincard")
            root = inner if os.path.isdir(inner) else path
            return LocalBackend(root), os.path.basename(os.path.abspath(path))
        if _PATHSPEC.match(path):
            from ._optional import require

            metaflow = require("metaflow", "metaflow")
            return _task_backend(metaflow.Task(path, _namespace_check=False))
        raise ConfigError(f"{path!r} is neither a store directory nor a Metaflow pathspec Flow/run/step/task")
    if hasattr(target, "metadata_dict") and hasattr(target, "pathspec"):
        return _task_backend(target)
    raise TypeError(f"load() takes a directory, a pathspec or a metaflow.Task, not {type(target).__name__}")


def load(target: Any) -> RunData:
    """Read everything a training task recorded: metric series, phases, checkpoints, logs, status.

    Args:
        target: a store directory (``TRAINCARD_DIR/...``), a store URL (``s3://bucket/prefix/run``,
            ``gs://...``, ``az://container/...``, read with Metaflow's clients), a Metaflow pathspec
            ``"Flow/run/step/task"`` or a ``metaflow.Task``. Attempts and ranks are merged; for any
            task of a ``@parallel`` gang, so are all the gang's nodes (``run.gang`` lists them).

    Example::

        run = traincard_otel.load("FinetuneFlow/1763/train/2")
        loss = run.metrics["loss"]
        print(loss.steps[-1], loss.values[-1], run.status["status"])
    """
    backend, title = backend_for(target)
    from .store.gang import GangReader

    gang = GangReader.for_task(backend, title)  # any task of a @parallel gang reads all its nodes
    return gang.read() if gang is not None else read_store(backend, source=title)
