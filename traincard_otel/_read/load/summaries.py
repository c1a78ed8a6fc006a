"""Task summaries in the store: ``summary.json`` beside a task's telemetry, the summaries of every
task of a step, and the tasks a task's card compares (its foreach siblings, or the branches a join
joins: :func:`branches`), read without reading any task's telemetry.

A task's store is ``<flow>/<run>/<step>/<task>/traincard/`` in a Metaflow datastore (or a folder of
its own under ``TRAINCARD_DIR``); the tasks of a step are the folders beside it. Listing them is
one call per step: a directory scan, one delimited S3 listing, or one level of Metaflow's listing
for the other datastores. The summary itself is :mod:`traincard_otel._analysis.summary`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..._store.backends import Backend, LocalBackend, MetaflowBackend
from ..._store.layout import SUMMARY_NAME
from ..._types import Foreign, JsonObject


def read_summary(backend: Backend) -> JsonObject | None:
    """The task's summary, or None when it has none (or it cannot be parsed)."""
    return _parse(backend.read_many([SUMMARY_NAME]).get(SUMMARY_NAME))


def _parse(raw: bytes | None) -> JsonObject | None:
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class StepFolder:
    """The tasks of one step, beside a task's store: their ids and their summaries.

    ``step`` names another step of the same run (a join reads the branches of the step it joins).
    """

    def __init__(self, backend: Backend, step: str | None = None) -> None:
        self._inner = "traincard"
        if isinstance(backend, MetaflowBackend):
            parts = backend.prefix.split("/")  # Flow/run/step/task/traincard
            if len(parts) < 5:
                raise ValueError(f"{backend.prefix!r} is not a task's traincard folder")
            if step is not None:
                parts[2] = step
            self.backend: Backend = MetaflowBackend(backend.ds_type, backend.ds_root, "/".join(parts[:3]))
            self._inner = "/".join(parts[4:])
        elif isinstance(backend, LocalBackend):
            root = Path(backend.root)
            if root.name == "traincard":
                steps = root.parent.parent
                self.backend = LocalBackend(steps.parent / step if step else steps)
            else:  # TRAINCARD_DIR/<run>: the runs beside it
                self.backend, self._inner = LocalBackend(root.parent), ""
        else:
            raise TypeError(f"no step folder for {type(backend).__name__}")
        self._parsed: dict[str, tuple[bytes, JsonObject]] = {}  # a summary read again unchanged

    def _summary_name(self, task_id: str) -> str:
        return f"{task_id}/{self._inner}/{SUMMARY_NAME}" if self._inner else f"{task_id}/{SUMMARY_NAME}"

    def task_ids(self) -> list[str]:
        """The task folders of the step (any folder, with telemetry or not), sorted."""
        return sorted(_folders(self.backend))

    def summaries(self, task_ids: Iterable[str] | None = None) -> dict[str, JsonObject]:
        """Task id -> summary, for the given tasks (default: every task of the step) that have one."""
        ids = self.task_ids() if task_ids is None else list(task_ids)
        names = {self._summary_name(t): t for t in ids}
        out: dict[str, JsonObject] = {}
        backend = self.backend
        if isinstance(backend, MetaflowBackend) and backend.ds_type == "s3":
            read = _s3_objects(backend, list(names))
        else:
            read = backend.read_many(names)
        for name, raw in read.items():
            known = self._parsed.get(name)
            found = known[1] if known is not None and known[0] == raw else _parse(raw)
            if found is not None:
                out[names[name]] = found
                self._parsed[name] = (raw, found)
        return out


def _folders(backend: Backend) -> list[str]:
    """The names of the folders directly under ``backend``'s root."""
    if isinstance(backend, LocalBackend):
        return _local_folders(str(backend.root))
    assert isinstance(backend, MetaflowBackend)
    if backend.ds_type == "local":
        return _local_folders(os.path.join(backend.ds_root, backend.prefix))
    if backend.ds_type == "s3":
        return _s3_folders(backend)
    entries = backend.storage.list_content([backend.prefix])
    return [e.path.rstrip("/").rsplit("/", 1)[-1] for e in entries if not e.is_file]


def _local_folders(path: str) -> list[str]:
    try:
        with os.scandir(path) as it:
            return [e.name for e in it if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []


_S3_READERS = 8


def _s3_objects(backend: MetaflowBackend, names: list[str]) -> dict[str, bytes]:
    """Small objects read with GETs on a few threads: Metaflow's bulk read starts a child process
    per call, seconds of CPU for a live card that reads its siblings every few seconds."""
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlparse

    from metaflow.plugins.datatools.s3.s3 import S3Client

    client: Foreign = S3Client().client
    url = urlparse(backend.ds_root)
    base = "/".join(p for p in (url.path.strip("/"), backend.prefix) if p)

    def get(name: str) -> tuple[str, bytes | None]:
        try:
            body = client.get_object(Bucket=url.netloc, Key=f"{base}/{name}")["Body"]
            return name, bytes(body.read())
        except client.exceptions.NoSuchKey:
            return name, None

    with ThreadPoolExecutor(max_workers=_S3_READERS, thread_name_prefix="traincard-summaries") as pool:
        return {name: raw for name, raw in pool.map(get, names) if raw is not None}


def _s3_folders(backend: MetaflowBackend) -> list[str]:
    """One delimited listing: the task folders, not every object of every task."""
    from urllib.parse import urlparse

    from metaflow.plugins.datatools.s3.s3 import S3Client

    client: Foreign = S3Client().client
    url = urlparse(backend.ds_root)
    base = "/".join(p for p in (url.path.strip("/"), backend.prefix) if p) + "/"
    out: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=url.netloc, Prefix=base, Delimiter="/"
    ):
        for common in page.get("CommonPrefixes") or []:
            out.append(str(common["Prefix"])[len(base) :].rstrip("/"))
    return out


def same_split(own: JsonObject | None, other: JsonObject | None) -> bool:
    """Whether two summaries' ``sweep`` positions are branches of the same foreach split."""
    if not isinstance(own, dict) or not isinstance(other, dict):
        return False
    return own.get("split") == other.get("split") and own.get("parent") == other.get("parent")


def branches(
    backend: Backend, summary: JsonObject, folders: dict[str | None, StepFolder] | None = None
) -> tuple[str, dict[str, JsonObject]] | None:
    """(a title, task id -> summary) of the tasks compared in ``summary``'s task's card: its
    foreach siblings (itself included), or the branches a join joins; None for neither.
    ``folders`` keeps the step folders read (and the summaries they parsed) for the next call."""
    folders = {} if folders is None else folders

    def folder(step: str | None) -> StepFolder:
        if step not in folders:
            folders[step] = StepFolder(backend, step=step)
        return folders[step]

    joins = summary.get("joins")
    if isinstance(joins, list) and joins:
        paths = [str(p).split("/") for p in joins]
        step = paths[0][2] if len(paths[0]) == 4 else None
        found = folder(step).summaries(p[-1] for p in paths)
        flow_run_step = "/".join(paths[0][:3])
        return f"{flow_run_step} (joined here)", found
    position = summary.get("sweep")
    if not isinstance(position, dict):
        return None
    found = {tid: s for tid, s in folder(None).summaries().items() if same_split(position, s.get("sweep"))}
    pathspec = str(summary.get("pathspec") or "")
    own_id = pathspec.rsplit("/", 1)[-1] if pathspec else ""
    if own_id:
        found[own_id] = summary
    return pathspec.rsplit("/", 1)[0] if pathspec else "sweep", found
