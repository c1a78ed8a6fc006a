"""load(target): the public reader entry point (a directory, a Metaflow pathspec, or a Task)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._store.reader import RunData, read_store
from ._targets import PATHSPEC, backend_for, is_store, resolve_one, stores_under


def _is_task_dir_or_url(target: str | os.PathLike[str]) -> bool:
    """A target read as it is: a URL, a store folder, or a folder with nothing (yet) to read."""
    path = os.fspath(target)
    if re.match(r"^(s3|gs|az|file|metaflow)://", path) or PATHSPEC.match(path):
        return True
    return os.path.isdir(path) and (is_store(Path(path)) or not stores_under(Path(path)))


def load(target: object) -> RunData:
    """Read everything a training task recorded: metric series, phases, checkpoints, logs, status.

    Args:
        target: a store directory (``TRAINCARD_DIR/...``; a folder of several runs gives the
            newest), a store URL (``s3://bucket/prefix/run``,
            ``gs://...``, ``az://container/...``, read with Metaflow's clients), a Metaflow pathspec
            (``"Flow/run/step/task"``, or ``Flow``, ``Flow/run``, ``Flow/run/step`` with ``latest``
            for the run) or a ``metaflow.Task``. Attempts and ranks are merged; for any
            task of a ``@parallel`` gang, so are all the gang's nodes (``run.gang`` lists them).

    Example::

        run = traincard_otel.load("FinetuneFlow/1763/train/2")
        loss = run.metrics["loss"]
        print(loss.steps[-1], loss.values[-1], run.status["status"])
    """
    if isinstance(target, (str, os.PathLike)) and not _is_task_dir_or_url(target):
        target = resolve_one(target)[0].target  # the newest run of a folder; Flow[/run[/step]]
    backend, title = backend_for(target)
    from ._store.gang import GangReader

    gang = GangReader.for_task(backend, title)  # any task of a @parallel gang reads all its nodes
    return gang.read() if gang is not None else read_store(backend, source=title)
