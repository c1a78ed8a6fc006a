"""Where this process is: every thread's innermost frames, as code locations only.

Read by the watchdog's thread (never the training thread) through ``sys._current_frames()``, when
the rank makes no progress, when asked, and once more when a stalled rank ends. A dump holds file,
line and function per frame, no locals, and is bounded whatever the code looks like: at most
``MAX_THREADS`` threads (the main thread first) of at most ``MAX_FRAMES`` innermost frames, text cut
at ``MAX_TEXT`` characters and escaped to printable UTF-8, the whole at most ``MAX_BYTES`` of JSON
(the deepest stacks lose frames first). 64 ranks' dumps stay under 1 MB.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from types import FrameType

from ..._schema.names import OWN_THREAD_PREFIX
from ..._types import JsonObject

MAX_THREADS = 16
MAX_FRAMES = 32  # innermost first: where a thread is, not how it got there
MAX_TEXT = 160
MAX_BYTES = 12_000
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def safe(text: object, limit: int = MAX_TEXT) -> str:
    """``text`` as printable UTF-8 of at most ``limit`` characters (the middle cut, since a path's
    ends say the most): lone surrogates and control characters escaped, never raised on."""
    s = text if isinstance(text, str) else repr(text)
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    if not s.isprintable():
        s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    if len(s) > limit:
        half = (limit - 1) // 2
        s = s[:half] + "…" + s[len(s) - (limit - 1 - half) :]
    return s


def _frames(frame: FrameType | None, skip_own: bool) -> tuple[list[JsonObject], int]:
    """The innermost ``MAX_FRAMES`` frames (innermost first) and the depth of the whole stack;
    ``skip_own`` drops this package's frames above the interrupted code (a signal handler's)."""
    out: list[JsonObject] = []
    depth = 0
    while frame is not None:
        code = frame.f_code
        if skip_own and not out and code.co_filename.startswith(_OWN):
            frame = frame.f_back
            continue
        depth += 1
        if len(out) < MAX_FRAMES:
            out.append(
                {"file": safe(code.co_filename), "line": frame.f_lineno or 0, "func": safe(code.co_name)}
            )
        frame = frame.f_back
    return out, depth


def capture(reason: str, rank: int, *, request: str | None = None) -> JsonObject:
    """Every thread's innermost frames now (``threads``, the main thread first, this package's own
    last: the bounds drop those first), with why it was taken (``stall``, ``request``,
    ``sigterm``, ``exit``), the time and the rank."""
    names = {t.ident: t for t in threading.enumerate()}
    main = threading.main_thread().ident
    me = threading.get_ident()
    frames = sys._current_frames()

    def order_key(ident: int) -> tuple[bool, bool, bool, int]:
        t = names.get(ident)
        own = t is not None and t.name.startswith(OWN_THREAD_PREFIX)
        return (ident != main, own, t is None, ident)

    order = sorted(frames, key=order_key)
    threads = []
    for ident in order[:MAX_THREADS]:
        stack, depth = _frames(frames[ident], skip_own=ident == me)
        t = names.get(ident)
        threads.append(
            {
                "name": safe(t.name if t is not None else f"thread {ident}", 64),
                "main": ident == main,
                "daemon": bool(t is not None and t.daemon),
                "depth": depth,
                "frames": stack,
            }
        )
    dump: JsonObject = {
        "time": time.time(),
        "reason": reason,
        "rank": rank,
        "pid": os.getpid(),
        "threads": threads,
        "threads_total": len(frames),
    }
    if request is not None:
        dump["request"] = safe(request, 64)
    return bounded(dump)


def bounded(dump: JsonObject) -> JsonObject:
    """``dump`` cut to ``MAX_BYTES`` of JSON: the longest stack loses its outermost frames first,
    then threads other than the main one go."""
    threads: list[JsonObject] = dump["threads"]
    while len(json.dumps(dump)) > MAX_BYTES:
        longest = max(threads, key=lambda t: len(t["frames"]))
        if len(longest["frames"]) > 4:
            del longest["frames"][len(longest["frames"]) // 2 :]
        elif len(threads) > 1:
            threads.pop()
        else:
            longest["frames"] = longest["frames"][:1]
            break
    return dump
