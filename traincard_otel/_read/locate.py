"""What a user may name as a run, resolved to stores: folders, bucket URLs and Metaflow pathspecs.

A *target* is a store folder, a folder holding several stores (``TRAINCARD_DIR`` with a run per
sub-folder, or a Metaflow local datastore root), a store URL (``s3://``, ``gs://``, ``az://``), or a
Metaflow pathspec at any depth: ``Flow``, ``Flow/run``, ``Flow/run/step``, ``Flow/run/step/task``,
with ``latest`` for the run. Every failure is a :class:`TargetError` whose message says what to
type instead.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from .._store.backends import Backend, LocalBackend, MetaflowBackend, backend_from_spec
from .._types import Foreign
from ..exceptions import ConfigError, TraincardError

_ATTEMPT_DIR = re.compile(r"^a\d+$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URL = re.compile(r"^(s3|gs|az|file|metaflow)://")
_MAX_DEPTH = 6

PATHSPEC = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*/[^/]+/[^/]+/[^/]+$")


def task_backend(task: Foreign) -> tuple[Backend, str]:
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


def backend_for(target: object) -> tuple[Backend, str]:
    """Resolve ``target`` (directory, pathspec string, ``metaflow.Task``) to a backend and a title."""
    if isinstance(target, (str, os.PathLike)):
        path = os.fspath(target)
        if re.match(r"^(s3|gs|az|file|metaflow)://", path):  # a store spec, as TRAINCARD_DIR takes
            return backend_from_spec(path), path.rstrip("/").rsplit("/", 1)[-1]
        if os.path.isdir(path):
            inner = os.path.join(path, "traincard")
            root = inner if os.path.isdir(inner) else path
            return LocalBackend(root), os.path.basename(os.path.abspath(path))
        if PATHSPEC.match(path):
            from .._optional import require

            metaflow = require("metaflow", "metaflow")
            return task_backend(metaflow.Task(path, _namespace_check=False))
        raise ConfigError(f"{path!r} is neither a store directory nor a Metaflow pathspec Flow/run/step/task")
    if hasattr(target, "metadata_dict") and hasattr(target, "pathspec"):
        return task_backend(target)
    raise TypeError(f"load() takes a directory, a pathspec or a metaflow.Task, not {type(target).__name__}")


class TargetError(TraincardError, LookupError):
    """A target names nothing that holds telemetry; the message says what to type instead."""


@dataclasses.dataclass(frozen=True)
class Found:
    """One store a target resolved to, with a label for listings (a path or a pathspec)."""

    label: str
    target: object  # what :func:`traincard_otel.load` reads: a path, a URL or a metaflow.Task
    updated: float = 0.0  # when it was last written (for "the latest")


def is_store(path: Path) -> bool:
    """A folder written by a store writer (``a<attempt>/`` inside), or a task folder holding one."""
    try:
        if (path / "traincard").is_dir():
            path = path / "traincard"
        return any(_ATTEMPT_DIR.match(p.name) and p.is_dir() for p in path.iterdir())
    except OSError:
        return False


def _updated(path: Path) -> float:
    newest = 0.0
    for state in path.rglob("state.json"):
        try:
            newest = max(newest, state.stat().st_mtime)
        except OSError:
            continue
    return newest


def stores_under(root: Path) -> list[Found]:
    """Every store below ``root`` (``root`` itself if it is one), newest last."""
    if is_store(root):
        return [Found(str(root), str(root), _updated(root))]
    found: list[Found] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            if child.name == "traincard" or is_store(child):
                store = child.parent if child.name == "traincard" else child
                found.append(Found(str(store), str(store), _updated(store)))
            elif depth < _MAX_DEPTH:
                walk(child, depth + 1)

    walk(root, 0)
    metaflow_root = root / ".metaflow"
    if metaflow_root.is_dir():
        walk(metaflow_root, 0)
    return sorted({f.label: f for f in found}.values(), key=lambda f: f.updated)


def metaflow_client() -> Foreign:
    """The Metaflow client, every namespace visible (what a target names is read wherever it is)."""
    from .._optional import require

    metaflow = require("metaflow", "metaflow")
    metaflow.namespace(None)
    return metaflow


def has_store(task: Foreign) -> bool:
    """Whether a Metaflow task's store holds anything."""
    try:
        backend, _title = backend_for(task)
        return bool(backend.list())
    except Exception:  # a task without datastore metadata, or one that cannot be listed
        return False


def tasks_of_step(step: Foreign) -> list[Found]:
    """The step's task to read: a gang's control task stands for the gang; else each task."""
    tasks = list(step)
    ids = {t.id: t for t in tasks}
    workers = [t for t in tasks if "_node_" in t.id]
    if workers and all(t.id.split("_node_")[0] in ids for t in workers):
        controls = [ids[i] for i in sorted({t.id.split("_node_")[0] for t in workers})]
        tasks = [t for t in tasks if "_node_" not in t.id and t not in controls] + controls
    return [Found(t.pathspec, t, t.finished_at.timestamp() if t.finished_at else 0.0) for t in tasks]


def _suggest(kind: str, name: str, choices: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, choices, n=1)
    hint = (
        f"; did you mean {close[0]!r}?"
        if close
        else (f"; there are: {', '.join(choices[:8])}" if choices else "")
    )
    return f"no {kind} {name!r}{hint}"


def _resolve_pathspec(spec: str) -> list[Found]:
    metaflow = metaflow_client()
    parts = spec.strip("/").split("/")
    from metaflow.exception import MetaflowNotFound

    try:
        flow = metaflow.Flow(parts[0])
    except MetaflowNotFound:
        flows = [f.id for f in metaflow.Metaflow()]
        raise TargetError(_suggest("flow", parts[0], flows) + " (see `traincard ls <folder>`)") from None
    if len(parts) == 1 or parts[1] == "latest":
        run = flow.latest_run
        if run is None:
            raise TargetError(f"flow {flow.id} has no runs yet")
    else:
        try:
            run = flow[parts[1]]
        except (MetaflowNotFound, KeyError):
            runs = [r.id for r in list(flow)[:8]]
            raise TargetError(
                _suggest("run", parts[1], runs) + f" in {flow.id} (or use {flow.id}/latest)"
            ) from None
    if len(parts) <= 2:
        steps = [s for s in run if any(has_store(t) for t in list(s)[:4])]
        if not steps:
            raise TargetError(f"run {run.pathspec} has no step with traincard telemetry")
        return [f for s in steps for f in tasks_of_step(s)]
    try:
        step = run[parts[2]]
    except (MetaflowNotFound, KeyError):
        raise TargetError(_suggest("step", parts[2], [s.id for s in run]) + f" in {run.pathspec}") from None
    if len(parts) == 3:
        return tasks_of_step(step)
    try:
        task = step[parts[3]]
    except (MetaflowNotFound, KeyError):
        raise TargetError(_suggest("task", parts[3], [t.id for t in step]) + f" in {step.pathspec}") from None
    return [Found(task.pathspec, task)]


def resolve(target: object) -> list[Found]:
    """Every store ``target`` names, oldest first (empty only if a folder holds none)."""
    if not isinstance(target, (str, os.PathLike)):
        return [Found(str(getattr(target, "pathspec", target)), target)]
    text = os.fspath(target)
    if _URL.match(text):
        return [Found(text, text)]
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise TargetError(f"{text} is a file; give the folder that holds a run's telemetry")
        return stores_under(path)
    parts = text.strip("/").split("/")
    if 1 <= len(parts) <= 4 and _NAME.match(parts[0]) and not text.startswith((".", "/", "~")):
        return _resolve_pathspec(text)
    raise TargetError(
        f"{text!r} is neither a folder nor a Metaflow pathspec; give a store folder, s3://bucket/prefix, "
        "or Flow[/run[/step[/task]]] (run may be 'latest')"
    )


def resolve_one(target: object) -> tuple[Found, list[Found]]:
    """The store to read for ``target``: the only one, or the newest of several (with the others).

    Raises:
        TargetError: nothing there, or several stores of which none is clearly the one meant.
    """
    found = resolve(target)
    if not found:  # only a path finds nothing: any other target is read as it is
        where = os.fspath(target) if isinstance(target, (str, os.PathLike)) else target
        raise TargetError(
            f"no traincard telemetry under {where!r}; give a run's folder, s3://bucket/prefix "
            "or a Metaflow pathspec (traincard ls <folder> lists what is there)"
        )
    if len(found) > 1 and is_pathspec(target):
        names = ", ".join(f.label for f in found[:8])
        raise TargetError(f"{target} holds {len(found)} tasks with telemetry ({names}); name one of them")
    return found[-1], found[:-1]


def is_pathspec(target: object) -> bool:
    if not isinstance(target, (str, os.PathLike)):
        return False
    text = os.fspath(target)
    return not _URL.match(text) and not Path(text).expanduser().exists()


@dataclasses.dataclass(frozen=True)
class Located:
    """The store a target names, ready to read: its backend, a title, and the Metaflow task
    pathspec when it is a task's (a Task's own, not a resume's origin)."""

    backend: Backend
    title: str
    pathspec: str | None


def _is_task_dir_or_url(target: str | os.PathLike[str]) -> bool:
    """A target read as it is: a URL, a store folder, or a folder with nothing (yet) to read."""
    path = os.fspath(target)
    if re.match(r"^(s3|gs|az|file|metaflow)://", path) or PATHSPEC.match(path):
        return True
    return os.path.isdir(path) and (is_store(Path(path)) or not stores_under(Path(path)))


def locate(target: object) -> Located:
    """The store ``target`` names (see :func:`traincard_otel.load`): a folder of several runs gives
    the newest, ``Flow[/run[/step]]`` its one task.

    Raises:
        TargetError: nothing there, or several stores of which none is clearly the one meant.
    """
    if isinstance(target, (str, os.PathLike)) and not _is_task_dir_or_url(target):
        target = resolve_one(target)[0].target
    backend, title = backend_for(target)
    return Located(backend, title, _pathspec_of(target, title))


def _pathspec_of(target: object, title: str) -> str | None:
    """The Metaflow task pathspec ``target`` names (a Task's own, not a resume's origin), or None."""
    own = getattr(target, "pathspec", None)
    if isinstance(own, str) and PATHSPEC.match(own):
        return own
    if isinstance(target, str) and PATHSPEC.match(target):
        return target
    return title if PATHSPEC.match(title) else None
