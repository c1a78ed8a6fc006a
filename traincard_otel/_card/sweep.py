"""The Sweep section of a card drawn from the store: the task's foreach siblings, or the branches a
join joins, read from their summaries (``summary.json``), never from their telemetry."""

from __future__ import annotations

from .._store.backends import Backend
from .._store.summaries import StepFolder, read_summary
from .._types import JsonObject
from .payload.contract import SweepSection
from .payload.sweep import sweep_section


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


def stored_section(backend: Backend, *, live: bool, standalone: bool) -> SweepSection | None:
    """The Sweep section of a card drawn from the store (the final card, ``traincard render``):
    from the task's stored summary; None for a task that is not in a foreach nor a join."""
    own = read_summary(backend)
    if own is None:
        return None
    found = branches(backend, own)
    if found is None:
        return None
    title, summaries = found
    return sweep_section(
        summaries, title=title, own=str(own.get("pathspec") or ""), live=live, standalone=standalone
    )
