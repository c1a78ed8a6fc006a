"""Where each rank of a gang is, from the stacks its watchdog recorded, and who the others wait for.

A rank's *training thread* is its main thread. It is *in a collective* when one of its frames is
one: ``torch.distributed`` (``all_reduce``, ``barrier``, ``monitored_barrier``, ...), DDP's and
FSDP's internals, DeepSpeed's ``comm`` and engine reductions, Accelerate's gather, reduce and
``wait_for_everyone`` helpers. When some stalled ranks wait in a collective and others are stuck
outside one, the latter are the culprits and the former wait for them: heartbeats alone cannot
tell, since every rank of a hung gang stops at the same step. Each group's stacks are the user's
threads (``threads``, the main one first), apart from this package's own background threads
(``own_threads``: console capture, watchdog, store writer ..., named ``traincard-...``), which the
card folds under one line. Pure functions of the stored dumps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..._schema.names import OWN_THREAD_PREFIX
from ..._types import JsonObject

# (path fragment, function pattern): a frame in that file whose function matches is a collective.
_COLLECTIVES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("torch/distributed/distributed_c10d.py", re.compile(r"^[a-z]\w*$")),
    ("torch/distributed/_functional_collectives", re.compile(r"^[a-z]\w*$")),
    ("torch/distributed/fsdp/", re.compile(r"all_gather|reduce_scatter|all_reduce|unshard|wait")),
    ("torch/nn/parallel/distributed.py", re.compile(r"sync|broadcast|all_reduce|join|rebuild")),
    ("deepspeed/comm/", re.compile(r"^[a-z]\w*$")),
    ("deepspeed/runtime/", re.compile(r"all_?reduce|all_gather|reduce_scatter|barrier|broadcast")),
    ("accelerate/utils/operations.py", re.compile(r"gather|reduce|broadcast|pad_across")),
    ("accelerate/state.py", re.compile(r"wait_for_everyone")),
    ("accelerate/accelerator.py", re.compile(r"wait_for_everyone|gather|reduce")),
)
_LIBRARY = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python3[^/\\]*[/\\]|^<frozen ")
_SKIP_FUNCS = {"wrapper", "inner", "_fn", "decorate_context"}


def _norm(path: str) -> str:
    return path.replace("\\", "/")


def collective(frames: Sequence[JsonObject]) -> JsonObject | None:
    """The outermost collective frame of a stack (innermost first), as ``{op, file, line}``."""
    found = None
    for f in frames:
        path = _norm(str(f.get("file", "")))
        func = str(f.get("func", ""))
        if func in _SKIP_FUNCS:
            continue
        if any(part in path and pattern.search(func) for part, pattern in _COLLECTIVES):
            found = f
    if found is None:
        return None
    return {"op": str(found.get("func")), "file": found.get("file"), "line": found.get("line")}


def _short(f: JsonObject) -> str:
    path = _norm(str(f.get("file", "?")))
    return f"{path.rsplit('/', 1)[-1]}:{f.get('line')}"


def _own_code(frames: Sequence[JsonObject]) -> JsonObject | None:
    """The innermost frame outside the standard library and installed packages (the training
    script's own), else the innermost frame."""
    for f in frames:
        if not _LIBRARY.search(_norm(str(f.get("file", "")))):
            return f
    return frames[0] if frames else None


def training_thread(dump: JsonObject) -> JsonObject | None:
    threads = dump.get("threads") or []
    return next((t for t in threads if t.get("main")), threads[0] if threads else None)


def where(dump: JsonObject) -> JsonObject:
    """Where a rank's training thread is: ``text`` ("waiting in all_reduce at train.py:88", "in
    fetch_batch at data.py:41"), ``collective`` (the op, or None) and ``top`` (its innermost frame)."""
    thread = training_thread(dump)
    frames: list[JsonObject] = list((thread or {}).get("frames") or [])
    op = collective(frames)
    if op is not None:
        # the call site: the first frame outside the library that issued it
        caller = next((f for f in frames if not _LIBRARY.search(_norm(str(f.get("file", ""))))), None)
        at = f" at {_short(caller)}" if caller is not None else ""
        return {"text": f"waiting in {op['op']}{at}", "collective": op["op"], "top": frames[0]}
    own = _own_code(frames)
    if own is None:
        return {"text": "no Python frame recorded", "collective": None, "top": None}
    return {"text": f"in {own.get('func')} at {_short(own)}", "collective": None, "top": frames[0]}


def rank_list(ranks: Sequence[int]) -> str:
    """``[0, 2, 3, 4, 7]`` -> "ranks 0, 2-4, 7" (one rank: "rank 1")."""
    rs = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if j == i else f"{rs[i]}-{rs[j]}" if j > i + 1 else f"{rs[i]}, {rs[j]}")
        i = j + 1
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(parts)


def _signature(dump: JsonObject) -> tuple[tuple[object, ...], ...]:
    thread = training_thread(dump) or {}
    return tuple((f.get("file"), f.get("line"), f.get("func")) for f in thread.get("frames") or [])


def _users_and_own(threads: Sequence[JsonObject]) -> tuple[list[JsonObject], list[JsonObject]]:
    """A dump's threads: the user's (the main one first) and this package's own."""
    users: list[JsonObject] = []
    own: list[JsonObject] = []
    for t in threads:
        (own if str(t.get("name", "")).startswith(OWN_THREAD_PREFIX) else users).append(t)
    users.sort(key=lambda t: not t.get("main"))
    return users, own


def locate(dumps: dict[int, JsonObject]) -> JsonObject | None:
    """Where each rank is (``groups``: ranks with the same training-thread stack together, the
    culprits first), the ``culprits`` (stuck outside a collective while others wait in one) and
    the ranks ``waiting`` for them; None without dumps."""
    if not dumps:
        return None
    places = {r: where(d) for r, d in dumps.items()}
    # Only stalled ranks' dumps judge: ranks asked mid-step are where a healthy gang passes by.
    stalled = {
        r: p for r, p in places.items() if dumps[r].get("reason") != "request" or dumps[r].get("stalled")
    }
    waiting = sorted(r for r, p in stalled.items() if p["collective"] is not None)
    outside = sorted(r for r, p in stalled.items() if p["collective"] is None)
    culprits = outside if waiting and outside else []
    by_sig: dict[tuple[tuple[object, ...], ...], list[int]] = {}
    for r in sorted(dumps):
        by_sig.setdefault(_signature(dumps[r]), []).append(r)
    groups = []
    for ranks in by_sig.values():
        first = dumps[ranks[0]]
        place = places[ranks[0]]
        users, own = _users_and_own(first.get("threads") or [])
        groups.append(
            {
                "ranks": ranks,
                "label": rank_list(ranks),
                "where": place["text"],
                "collective": place["collective"],
                "culprit": ranks[0] in culprits,
                "reason": first.get("reason"),
                "time": first.get("time"),
                "threads": users,
                "own_threads": own,
            }
        )
    groups.sort(key=lambda g: (not g["culprit"], g["collective"] is not None, g["ranks"][0]))
    summary = " · ".join(f"{g['label']}: {g['where']}" for g in groups)
    return {
        "flight_recorder": joined(dumps),
        "groups": groups,
        "summary": summary,
        "culprits": culprits,
        "waiting": waiting if culprits else [],
        "places": {r: p["text"] for r, p in places.items()},
        "collective": next((places[r]["collective"] for r in waiting), None),
    }


def joined(dumps: dict[int, JsonObject]) -> JsonObject | None:
    """From the flight recorder's summaries (``collectives`` in the dumps): the collective the
    most advanced ranks entered last, and the ranks that have not joined it (their last entered
    is an earlier one); None where no rank's recorder was on."""
    last = {r: d["collectives"]["last"] for r, d in dumps.items() if (d.get("collectives") or {}).get("last")}
    if not last:
        return None
    top = max(e["seq"] for e in last.values())
    ahead = sorted(r for r, e in last.items() if e["seq"] == top)
    behind = sorted(r for r, e in last.items() if e["seq"] < top)
    op = last[ahead[0]]["op"]
    text = f"{rank_list(ahead)} entered {op} #{top}"
    if behind:
        lags = [f"{last[r]['op']} #{last[r]['seq']}" for r in behind[:8]]
        said = (
            lags[0]
            if len(behind) == 1
            else "; ".join(f"rank {r}: {x}" for r, x in zip(behind, lags, strict=False))
        )
        text += f"; {rank_list(behind)} not yet (last entered: {said})"
    ranks = [{"rank": r, **{k: e[k] for k in ("seq", "op", "state")}} for r, e in sorted(last.items())]
    return {"pending": {"seq": top, "op": op}, "not_joined": behind, "ranks": ranks, "text": text}
