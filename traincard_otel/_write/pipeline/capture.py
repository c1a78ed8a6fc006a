"""What a pipeline starts beside its schedule to watch the process: the console capture and the
watch on the other ranks of its node. Each starts or is skipped on its own; a failure to start is
logged once and costs only that part."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._identity import RankIdentity
from ..._safety import internal_error
from ..._schema import Attr, LogLines
from ..._types import JsonObject
from ..queue import ReportQueue

if TYPE_CHECKING:
    from ..telemetry.console import ConsoleCapture
    from ..telemetry.siblings import SiblingWatch


def capture_console(queue: ReportQueue, rank: RankIdentity) -> ConsoleCapture | None:
    """Start capturing stdout and stderr into ``queue`` as log lines (None: it could not start)."""
    from ..telemetry.console import ConsoleCapture, Line

    stream_attrs = {Attr.RANK: str(rank.rank)}

    def sink(lines: list[Line], stream: str | None) -> None:
        attrs = {**stream_attrs, Attr.LOG_STREAM: stream} if stream else stream_attrs
        levels, texts, tracebacks, times = zip(*lines, strict=True)
        blocks = {i: tb for i, tb in enumerate(tracebacks) if tb is not None} if any(tracebacks) else {}
        queue.put(LogLines(list(times), list(levels), list(texts), blocks, attrs))

    logged: tuple[int, str | None, tuple[str, ...]] = (0, None, ())  # the messages, as last seen

    def seen(line: str) -> bool:
        nonlocal logged
        recent = queue.recent_messages
        if not recent:
            return False
        last = recent[-1]
        if logged[0] != len(recent) or logged[1] is not last:  # new messages since the last line
            logged = (len(recent), last, tuple(m for m in list(recent) if len(m) >= 8))
        return any(map(line.__contains__, logged[2]))

    try:
        return ConsoleCapture(sink, seen).start()
    except Exception as exc:
        internal_error("console capture", exc)
        return None


def watch_siblings(
    rank: RankIdentity, has_store: bool, ended: Callable[[JsonObject], None]
) -> SiblingWatch | None:
    """Start watching the other ranks of this node end (``ended`` gets each one's record); None
    where there is nothing to watch (one rank, a launcher, no store) or no way to."""
    from ..telemetry.siblings import SiblingWatch

    if rank.world_size < 2 or rank.launcher or not has_store or not SiblingWatch.available():
        return None
    try:
        return SiblingWatch(rank, ended).start()
    except Exception as exc:
        internal_error("sibling watch", exc)
        return None
