"""A located store read whole: a task's own store, or, for any task of a ``@parallel`` gang, every
node's store merged (:mod:`.gang`)."""

from __future__ import annotations

from ..._data.rundata import RunData
from ..locate import Located, locate
from .gang import GangReader
from .reader import read_store


def read_located(found: Located) -> RunData:
    """What the store ``found`` recorded, as it holds it (not analysed)."""
    gang = GangReader.for_task(found.backend, found.title)
    return gang.read() if gang is not None else read_store(found.backend, source=found.title)


def read(target: object) -> tuple[RunData, str | None]:
    """What ``target`` recorded (see :func:`traincard_otel.load`), not analysed, and its Metaflow
    task pathspec if it has one."""
    found = locate(target)
    return read_located(found), found.pathspec
