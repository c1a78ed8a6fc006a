"""Where the store's bytes live: a local directory or a Metaflow datastore (local, S3, GCS, Azure).

Both only ever *replace whole objects* (no append), which is what object stores allow: a local
write goes to a temporary file that is renamed over the target, a datastore write is one PUT.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from ..exceptions import ConfigError


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


class MetaflowBackend:
    """The task's folder in the Metaflow datastore, through Metaflow's own storage classes."""

    def __init__(self, ds_type: str, ds_root: str, prefix: str) -> None:
        self.ds_type, self.ds_root, self.prefix = ds_type, ds_root, prefix.strip("/")
        self._storage: Any = None

    @property
    def spec(self) -> str:
        return f"metaflow://{self.ds_type}|{self.ds_root}|{self.prefix}"

    @property
    def storage(self) -> Any:
        if self._storage is None:
            from metaflow.plugins import DATASTORES

            impls = [d for d in DATASTORES if self.ds_type == d.TYPE]
            if not impls:
                raise ConfigError(f"Metaflow has no datastore of type {self.ds_type!r}")
            self._storage = impls[0](self.ds_root)
            if self.ds_type == "s3":
                self._storage.s3_client = _quick_s3_client()
        return self._storage

    def write(self, name: str, data: bytes) -> None:
        path = f"{self.prefix}/{name}"
        self.storage.save_bytes([(path, io.BytesIO(data))], overwrite=True)

    def list(self) -> list[str]:
        out: list[str] = []
        pending = [self.prefix]
        while pending:
            entries = self.storage.list_content(pending)
            pending = []
            for entry in entries:
                path = entry.path.rstrip("/")
                if entry.is_file:
                    rel = path[len(self.prefix) + 1 :]
                    if not rel.rsplit("/", 1)[-1].startswith(".tmp-"):
                        out.append(rel)
                else:
                    pending.append(path)
        return out

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        keys = [f"{self.prefix}/{n}" for n in names]
        out: dict[str, bytes] = {}
        if not keys:
            return out
        # S3 temporary files vanish when the context closes, so read inside it.
        with self.storage.load_bytes(keys) as loaded:
            for key, local_path, _meta in loaded:
                if local_path is not None:
                    with open(local_path, "rb") as fh:
                        out[key[len(self.prefix) + 1 :]] = fh.read()
        return out


def _quick_s3_client() -> Any:
    """An S3 client that gives up fast: the writer keeps a failed segment and retries it at the next
    flush anyway, while botocore's own retries (10 adaptive attempts by Metaflow's default) run in
    transfer threads that the interpreter joins at exit, so a dead endpoint would hold exit for
    minutes."""
    from metaflow.metaflow_config import DATATOOLS_CLIENT_PARAMS
    from metaflow.plugins.datatools.s3.s3 import S3Client

    params = dict(DATATOOLS_CLIENT_PARAMS or {})  # endpoint URL and the like from Metaflow's config
    config = params.get("config") or {}
    if not isinstance(config, dict):
        return S3Client()  # the user configured a botocore Config object: keep theirs
    params["config"] = {
        "connect_timeout": 5,
        "read_timeout": 30,
        "retries": {"max_attempts": 2, "mode": "standard"},
        **config,
    }
    return S3Client(s3_client_params=params)


def backend_from_spec(spec: str) -> Backend:
    """Build a backend from ``file://<dir>`` / ``metaflow://<type>|<root>|<prefix>`` / a plain path."""
    if spec.startswith("metaflow://"):
        parts = spec[len("metaflow://") :].split("|")
        if len(parts) != 3:
            raise ConfigError(f"bad store spec {spec!r}; expected metaflow://<ds-type>|<ds-root>|<prefix>")
        return MetaflowBackend(*parts)
    if spec.startswith("file://"):
        return LocalBackend(spec[len("file://") :])
    if "://" in spec:
        raise ConfigError(f"bad store spec {spec!r}; use a directory, file://<dir> or metaflow://...")
    return LocalBackend(spec)
