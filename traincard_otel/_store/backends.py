"""Where the store's bytes live: a local directory or a Metaflow datastore (local, S3, GCS, Azure).

Both only ever *replace whole objects* (no append), which is what object stores allow: a local
write goes to a temporary file that is renamed over the target, a datastore write is one PUT.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from .._types import Foreign, JsonObject
from ..exceptions import ConfigError
from .datastore_calls import bounded_delete, bounded_put, quick_s3_client


class Backend(Protocol):
    """Minimal object-store interface used by the writer and the reader."""

    @property
    def spec(self) -> str:
        """A string that :func:`backend_from_spec` turns back into this backend (for children)."""
        ...

    def write(self, name: str, data: bytes) -> None: ...

    def list(self) -> list[str]: ...

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]: ...


class LocalBackend:
    """A plain directory; used outside Metaflow (``TRAINCARD_DIR``) and by the CLI."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        # A write runs every flush interval on a thread that competes with training for the GIL:
        # plain os calls (four system calls a write), a folder made only when a write finds it
        # missing, and temporary names from a counter (mkstemp draws random names in Python) take
        # about 60 µs less CPU per write than pathlib + mkstemp's 230.
        self._tmp_names = itertools.count()
        self._tmp_prefix = f".tmp-{os.getpid()}-{secrets.token_hex(3)}-"

    @property
    def spec(self) -> str:
        return f"file://{self.root.resolve()}"

    def write(self, name: str, data: bytes) -> None:
        target = os.path.join(self.root, name)
        folder = os.path.dirname(target)
        tmp = os.path.join(folder, f"{self._tmp_prefix}{next(self._tmp_names)}.part")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileNotFoundError:  # the folder's first write, or it was removed since
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                # os.write rather than a file object, whose set-up makes three more system calls
                # (fstat, ioctl, lseek), each releasing the GIL that this thread must take back.
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def list(self) -> list[str]:
        if not self.root.is_dir():
            return []
        out: list[str] = []
        for dirpath, _dirs, files in os.walk(self.root):
            rel = Path(dirpath).relative_to(self.root)
            out.extend((rel / f).as_posix() for f in files if not f.startswith(".tmp-"))
        return out

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        out = {}
        for name in names:
            try:
                out[name] = (self.root / name).read_bytes()
            except FileNotFoundError:
                continue
        return out

    def delete(self, names: Iterable[str]) -> None:
        for name in names:
            (self.root / name).unlink(missing_ok=True)


_SCHEMES = {"s3": "s3", "gs": "gs", "az": "azure"}


class MetaflowBackend:
    """A folder in a Metaflow datastore (S3, GCS, Azure Blob, local), through Metaflow's clients.

    ``ds_root`` is the datastore root as Metaflow spells it (``s3://bucket/metaflow``,
    ``gs://bucket/metaflow``, ``container/metaflow`` for Azure) and ``prefix`` the folder under it.
    Credentials and endpoints are Metaflow's own configuration (``METAFLOW_S3_ENDPOINT_URL``,
    ``METAFLOW_DATATOOLS_CLIENT_PARAMS``, ``METAFLOW_AZURE_STORAGE_BLOB_SERVICE_ENDPOINT``, the
    Google and AWS default credential chains...). Reads and listings go through Metaflow's datastore
    storage classes (an S3 listing through Metaflow's S3 client, in one call in this process); a
    write is one attempt bounded by ``CONNECT_TIMEOUT_S`` and ``READ_TIMEOUT_S``.
    """

    def __init__(self, ds_type: str, ds_root: str, prefix: str) -> None:
        self.ds_type, self.ds_root, self.prefix = ds_type, ds_root.rstrip("/"), prefix.strip("/")
        self._storage: Foreign = None  # Metaflow's datastore storage for ds_type
        self._put: Callable[[str, bytes], None] | None = None
        self._delete: Callable[[list[str]], None] | None = None
        self._lister: Foreign = None  # Metaflow's S3 client, for listings

    @property
    def spec(self) -> str:
        return f"metaflow://{self.ds_type}|{self.ds_root}|{self.prefix}"

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    @property
    def storage(self) -> Foreign:
        if self._storage is None:
            from metaflow.plugins import DATASTORES

            impls = [d for d in DATASTORES if self.ds_type == d.TYPE]
            if not impls:
                raise ConfigError(f"Metaflow has no datastore of type {self.ds_type!r}")
            self._storage = impls[0](self.ds_root)
            if self.ds_type == "s3":
                self._storage.s3_client = quick_s3_client()
        return self._storage

    def write(self, name: str, data: bytes) -> None:
        if self._put is None:
            self._put = bounded_put(self.ds_type, self.ds_root, self.storage)
        self._put(self._key(name), data)

    def list(self) -> list[str]:
        if self.ds_type == "s3":
            if self._lister is None:
                from metaflow.plugins.datatools.s3.s3 import S3Client

                self._lister = S3Client()  # Metaflow's credentials, endpoint and retry policy
            return _s3_keys(self._lister.client, self.ds_root, self.prefix)
        out: list[str] = []
        pending = [self.prefix]
        cut = len(self.prefix) + 1 if self.prefix else 0
        while pending:
            entries = self.storage.list_content(pending)
            pending = []
            for entry in entries:
                path = entry.path.rstrip("/")
                if entry.is_file:
                    rel = path[cut:]
                    if not rel.rsplit("/", 1)[-1].startswith(".tmp-"):
                        out.append(rel)
                else:
                    pending.append(path)
        return out

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        keys = [self._key(n) for n in names]
        cut = len(self.prefix) + 1 if self.prefix else 0
        out: dict[str, bytes] = {}
        if not keys:
            return out
        # S3 temporary files vanish when the context closes, so read inside it.
        with self.storage.load_bytes(keys) as loaded:
            for key, local_path, _meta in loaded:
                if local_path is not None:
                    with open(local_path, "rb") as fh:
                        out[key[cut:]] = fh.read()
        return out

    def delete(self, names: Iterable[str]) -> None:
        """Remove objects (compaction's merged segments and parts), one bounded call per object or
        batch of 1 000 on S3; an object already gone is no error."""
        keys = [self._key(n) for n in names]
        if not keys:
            return
        if self._delete is None:
            self._delete = bounded_delete(self.ds_type, self.ds_root, self.storage)
        self._delete(keys)


def read_one(backend: Backend, name: str) -> bytes | None:
    """One object's bytes, or None if there is none: on S3 one GET in this process (Metaflow's
    batch reads start a child process per call, too much for an object polled every few seconds)."""
    return read_small(backend, [name]).get(name)


_S3_READERS = 8


def read_small(backend: Backend, names: Iterable[str]) -> dict[str, bytes]:
    """Small objects (states, markers, summaries) by name; a missing one is left out. On S3 they
    are GETs on a few threads in this process: Metaflow's bulk read starts a child process per
    call, seconds of CPU for a watchdog or a live card that reads every few seconds."""
    wanted = list(names)
    if not (isinstance(backend, MetaflowBackend) and backend.ds_type == "s3"):
        return backend.read_many(wanted)
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlparse

    url = urlparse(backend.ds_root)
    base = "/".join(p for p in (url.path.strip("/"), backend.prefix) if p)
    client = backend.storage.s3_client.client

    def get(name: str) -> tuple[str, bytes | None]:
        try:
            return name, bytes(client.get_object(Bucket=url.netloc, Key=f"{base}/{name}")["Body"].read())
        except client.exceptions.NoSuchKey:
            return name, None

    if len(wanted) == 1:
        found = [get(wanted[0])]
    else:
        with ThreadPoolExecutor(max_workers=_S3_READERS, thread_name_prefix="traincard-reads") as pool:
            found = list(pool.map(get, wanted))
    return {name: raw for name, raw in found if raw is not None}


def _s3_keys(client: Foreign, ds_root: str, prefix: str) -> list[str]:
    """Every object under ``prefix`` in one paginated listing, in this process: Metaflow's
    ``list_content`` lists a level at a time, each through a child process (``s3op``), and the
    rank watchdog and the live card list every few seconds."""
    from urllib.parse import urlparse

    url = urlparse(ds_root)
    base = "/".join(p for p in (url.path.strip("/"), prefix) if p)
    start = f"{base}/" if base else ""
    out: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=url.netloc, Prefix=start):
        for obj in page.get("Contents") or []:
            rel = str(obj["Key"])[len(start) :]
            if rel and not rel.endswith("/") and not rel.rsplit("/", 1)[-1].startswith(".tmp-"):
                out.append(rel)
    return out


def backend_from_spec(spec: str) -> Backend:
    """Build a backend from a store spec.

    Accepted forms (``TRAINCARD_STORE``, ``TRAINCARD_DIR``, :func:`traincard_otel.load`):

    - ``/a/dir``, ``file:///a/dir``: a local directory;
    - ``s3://bucket/prefix``: Amazon S3 (or any S3-compatible server named by
      ``METAFLOW_S3_ENDPOINT_URL``), with Metaflow's AWS credentials and client settings;
    - ``gs://bucket/prefix``: Google Cloud Storage, with Google's default credentials as Metaflow
      uses them (``STORAGE_EMULATOR_HOST`` points google-cloud-storage at an emulator);
    - ``az://container/prefix``: Azure Blob Storage in the account of
      ``METAFLOW_AZURE_STORAGE_BLOB_SERVICE_ENDPOINT``, with Metaflow's Azure credentials;
    - ``metaflow://<ds-type>|<ds-root>|<prefix>``: any Metaflow datastore, spelled as Metaflow does
      (what a Metaflow task hands its child processes).
    """
    if spec.startswith("metaflow://"):
        parts = spec[len("metaflow://") :].split("|")
        if len(parts) != 3:
            raise ConfigError(f"bad store spec {spec!r}; expected metaflow://<ds-type>|<ds-root>|<prefix>")
        return MetaflowBackend(*parts)
    if spec.startswith("file://"):
        return LocalBackend(spec[len("file://") :])
    scheme, sep, rest = spec.partition("://")
    if sep and scheme in _SCHEMES:
        bucket, _, prefix = rest.strip("/").partition("/")
        if not bucket:
            raise ConfigError(f"bad store spec {spec!r}; expected {scheme}://<bucket>/<prefix>")
        root = bucket if scheme == "az" else f"{scheme}://{bucket}"
        return MetaflowBackend(_SCHEMES[scheme], root, prefix)
    if sep:
        raise ConfigError(
            f"bad store spec {spec!r}; use a directory, file://<dir>, s3://, gs://, az://<bucket>/<prefix>"
            " or metaflow://<ds-type>|<ds-root>|<prefix>"
        )
    return LocalBackend(spec)


def sibling_backend(backend: Backend, task_id: str) -> Backend:
    """The store of task ``task_id`` of the same step, beside ``backend``'s task."""
    if isinstance(backend, MetaflowBackend):
        parts = backend.prefix.split("/")  # Flow/run/step/task/traincard
        if len(parts) < 5:
            raise ValueError(f"{backend.prefix!r} is not a task's traincard folder")
        return MetaflowBackend(backend.ds_type, backend.ds_root, "/".join([*parts[:3], task_id, *parts[4:]]))
    if isinstance(backend, LocalBackend):
        root = Path(backend.root)
        if root.name == "traincard":
            return LocalBackend(root.parent.parent / task_id / "traincard")
        return LocalBackend(root.parent / task_id)
    raise TypeError(f"no sibling store for {type(backend).__name__}")


def node_markers(control: Backend, names: Iterable[str]) -> dict[int, tuple[JsonObject, Backend]]:
    """A ``@parallel`` gang's nodes from their markers in the control task's store (``names``:
    ``gang/node-<i>.json`` objects): node index -> (its marker, its task's store). A marker that
    does not parse is left out."""
    out: dict[int, tuple[JsonObject, Backend]] = {}
    for raw in read_small(control, names).values():
        try:
            info = json.loads(raw)
            index = int(info["node_index"])
        except (ValueError, KeyError, TypeError):
            continue
        task = str(info.get("task_id"))
        own = task == str(info.get("control_task_id"))
        out[index] = (info, control if own else sibling_backend(control, task))
    return out
