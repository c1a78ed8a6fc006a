"""Task summaries in the store: each writer's beside a task's telemetry, merged into the task's; the
summaries of every task of a step; and the tasks a task's card compares (its foreach siblings, or
the branches a join joins: :func:`branches`), read without reading any task's telemetry.

A task's store is ``<flow>/<run>/<step>/<task>/traincard/`` in a Metaflow datastore (or a folder of
its own under ``TRAINCARD_DIR``); the tasks of a step are the folders beside it. Each process that
wrote telemetry there keeps its own summary (``summary/a<attempt>-r<rank>-<writer>.json``); a store
written before that has one ``summary.json``. On S3 the summaries of a whole step come from one
listing of the step whose delimiter is ``/traincard/a``: every task's telemetry (under its ``a*``
folders) folds into one entry, and the summaries are listed by name, with their ETags, so a
summary that did not change is not read again. A local folder is scanned; the other datastores
are listed a task at a time. The summary itself and the merge are
:mod:`traincard_otel._analysis.summary`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..._analysis.summary import merge_summaries
from ..._store.backends import Backend, LocalBackend, MetaflowBackend, read_small
from ..._store.layout import SUMMARY_NAME, SUMMARY_PREFIX
from ..._types import Foreign, JsonObject

Version = object  # what tells that an object changed: an ETag, a file's mtime and size, its bytes


def _is_summary(name: str) -> bool:
    return name == SUMMARY_NAME or (
        name.startswith(SUMMARY_PREFIX) and name.endswith(".json") and "/" not in name[len(SUMMARY_PREFIX) :]
    )


def read_summary(backend: Backend) -> JsonObject | None:
    """The task's summary (its writers' merged), or None when it has none (or none parses)."""
    names = list(_task_summaries(backend))
    read = read_small(backend, names)
    return merge_summaries([found for raw in read.values() if (found := _parse(raw)) is not None])


def _task_summaries(backend: Backend) -> dict[str, Version]:
    """The names of a task's summary objects, each with what tells that it changed."""
    if isinstance(backend, LocalBackend):
        return _local_summaries(str(backend.root))
    if isinstance(backend, MetaflowBackend):
        if backend.ds_type == "local":
            return _local_summaries(os.path.join(backend.ds_root, backend.prefix))
        if backend.ds_type == "s3":  # the summaries' folder, and an older store's one object
            return {**_s3_listing(backend, SUMMARY_PREFIX, "/"), SUMMARY_NAME: None}
        return {n: n for n in _listed(backend, backend.prefix)}
    return {n: n for n in backend.list() if _is_summary(n)}  # another backend: its whole listing


def _local_summaries(folder: str) -> dict[str, Version]:
    out: dict[str, Version] = {}
    try:
        st = os.stat(os.path.join(folder, SUMMARY_NAME))
        out[SUMMARY_NAME] = (st.st_mtime_ns, st.st_size)
    except OSError:
        pass
    try:
        with os.scandir(os.path.join(folder, SUMMARY_PREFIX)) as it:
            for e in it:
                if e.name.endswith(".json") and not e.name.startswith(".tmp-"):
                    st = e.stat()
                    out[SUMMARY_PREFIX + e.name] = (st.st_mtime_ns, st.st_size)
    except OSError:
        pass
    return out


def _listed(backend: MetaflowBackend, folder: str) -> list[str]:
    """A task's summary names through Metaflow's own listing (GCS, Azure): two levels."""
    out = []
    cut = len(folder) + 1
    for entry in backend.storage.list_content([folder, f"{folder}/{SUMMARY_PREFIX.rstrip('/')}"]):
        name = entry.path.rstrip("/")[cut:]
        if entry.is_file and _is_summary(name):
            out.append(name)
    return out


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
    It keeps what it read: a summary object is read again only when it changed, and a task's
    summaries are merged again only when one of them did.
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
        self._parsed: dict[str, tuple[Version, JsonObject | None]] = {}  # object -> (version, summary)
        self._merged: dict[str, tuple[tuple[tuple[str, Version], ...], JsonObject | None]] = {}

    def _store(self, task_id: str) -> str:
        return f"{task_id}/{self._inner}" if self._inner else task_id

    def task_ids(self) -> list[str]:
        """The task folders of the step (any folder, with telemetry or not), sorted."""
        return sorted(_folders(self.backend))

    def _listing(self, task_ids: Iterable[str] | None) -> dict[str, dict[str, Version]]:
        """Task id -> its summary objects (name under the step -> version)."""
        backend = self.backend
        if isinstance(backend, MetaflowBackend) and backend.ds_type == "s3" and self._inner:
            wanted = set(task_ids) if task_ids is not None else None
            out: dict[str, dict[str, Version]] = {}
            listed = _s3_listing(backend, "", f"/{self._inner}/a")
            for name, version in listed.items():
                task, sep, rest = name.partition(f"/{self._inner}/")
                if sep and _is_summary(rest) and (wanted is None or task in wanted):
                    out.setdefault(task, {})[name] = version
            return out
        ids = self.task_ids() if task_ids is None else list(task_ids)
        out = {}
        for task in ids:
            store = self._store(task)
            if isinstance(backend, LocalBackend):
                found = _local_summaries(os.path.join(backend.root, store))
            elif isinstance(backend, MetaflowBackend) and backend.ds_type == "local":
                found = _local_summaries(os.path.join(backend.ds_root, backend.prefix, store))
            else:
                assert isinstance(backend, MetaflowBackend)
                found = {n: n for n in _listed(backend, f"{backend.prefix}/{store}")}
            if found:
                out[task] = {f"{store}/{n}": v for n, v in found.items()}
        return out

    def summaries(self, task_ids: Iterable[str] | None = None) -> dict[str, JsonObject]:
        """Task id -> summary, for the given tasks (default: every task of the step) that have one."""
        listing = self._listing(task_ids)
        versions = {n: v for objects in listing.values() for n, v in objects.items()}
        stale = [n for n, v in versions.items() if self._version(n) != v]
        if stale:
            backend = self.backend
            read = read_small(backend, stale)
            for name in stale:
                raw = read.get(name)
                if raw is not None:  # (gone since it was listed: not kept, read again next time)
                    version = raw if versions[name] == name else versions[name]  # no version: its bytes
                    self._parsed[name] = (version, _parse(raw))
        out: dict[str, JsonObject] = {}
        for task, objects in listing.items():
            key = tuple(sorted((n, self._parsed[n][0]) for n in objects if n in self._parsed))
            known = self._merged.get(task)
            if known is None or known[0] != key:
                parts = [found for n in objects if n in self._parsed and (found := self._parsed[n][1])]
                known = self._merged[task] = (key, merge_summaries(parts))
            if known[1] is not None:
                out[task] = known[1]
        return out

    def _version(self, name: str) -> Version | None:
        known = self._parsed.get(name)
        return known[0] if known is not None else None


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


def _s3_base(backend: MetaflowBackend) -> tuple[Foreign, str, str]:
    """(Metaflow's S3 client, the bucket, the backend's folder as a key prefix without slashes)."""
    from urllib.parse import urlparse

    from metaflow.plugins.datatools.s3.s3 import S3Client

    url = urlparse(backend.ds_root)
    return S3Client().client, url.netloc, "/".join(p for p in (url.path.strip("/"), backend.prefix) if p)


def _s3_listing(backend: MetaflowBackend, under: str, delimiter: str) -> dict[str, Version]:
    """Object name (relative to the backend's folder) -> ETag, for the objects whose names start
    with ``under``: one paginated listing, the keys holding ``delimiter`` after ``under`` folded
    into one entry each (and left out)."""
    client, bucket, base = _s3_base(backend)
    prefix = f"{base}/{under}"
    out: dict[str, Version] = {}
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, Delimiter=delimiter
    ):
        for obj in page.get("Contents") or []:
            out[str(obj["Key"])[len(base) + 1 :]] = obj.get("ETag")
    return out


def _s3_folders(backend: MetaflowBackend) -> list[str]:
    """One delimited listing: the task folders, not every object of every task."""
    client, bucket, base = _s3_base(backend)
    out: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=base + "/", Delimiter="/"
    ):
        for common in page.get("CommonPrefixes") or []:
            out.append(str(common["Prefix"])[len(base) + 1 :].rstrip("/"))
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
    if own_id and own_id not in found:  # not written yet: where it sits is all there is
        found[own_id] = summary
    return pathspec.rsplit("/", 1)[0] if pathspec else "sweep", found
