"""The commands that ask a job's running ranks through its store: ``traincard stacks`` (where each
rank is) and ``traincard profile`` (a ``torch.profiler`` capture of the next steps of each rank).

Each writes an entry into the store's requests object (:mod:`traincard_otel._store.requests`),
which every rank's watchdog reads every few seconds; the answers come back through the store (a
stack dump in the rank's state, a profile's summary and trace as objects), so no port is opened
anywhere and a bucket works as a folder does. A run with no rank running is told at once.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

from ._data.rundata import RunData
from ._read import locate as _targets
from ._read.load.profiles import location, rank_summary
from ._read.run import load
from ._store import layout, requests
from ._store.backends import Backend
from ._types import JsonObject

Pick = Callable[[str], object]


def running_ranks(data: RunData) -> dict[int, JsonObject]:
    """The states of the latest attempt's ranks that are marked running, by rank."""
    attempt = max((int(s.get("attempt", 0)) for s in data.states), default=0)
    return {
        int(s.get("rank", 0)): s
        for s in data.states
        if int(s.get("attempt", 0)) == attempt and s.get("status") == "running"
    }


def _live(target: object, command: str) -> tuple[Backend, str, RunData]:
    backend, title = _targets.backend_for(target)
    data = load(target)
    if not running_ranks(data):  # a run that ended: nobody would answer, and nothing is written
        raise _targets.TargetError(
            f"no rank of {title} is running (the run is {data.status.get('status') or 'unknown'}); "
            f"`traincard {command}` asks the ranks of a running job"
        )
    return backend, title, data


def stacks(args: argparse.Namespace, pick: Pick) -> int:
    """Ask the running ranks for their stacks, wait for the answers, print them grouped."""
    from ._analysis.gang.stacks import locate

    target = pick(args.target)
    backend, _title, data = _live(target, "stacks")
    ident = uuid.uuid4().hex[:12]
    requests.ask(backend, "stacks", {"id": ident, "time": time.time()})
    deadline = time.monotonic() + args.timeout
    while True:
        time.sleep(1.0)
        data = load(target)
        live = running_ranks(data)
        answers = {
            r: s["stacks"] for r, s in live.items() if (s.get("stacks") or {}).get("answered") == ident
        }
        if (live and len(answers) == len(live)) or time.monotonic() >= deadline:
            break
    if not answers:
        raise _targets.TargetError(
            f"no running rank answered in {args.timeout:g} s ({len(live)} marked running); a rank looks "
            "for the request every few seconds while its process runs"
        )
    located = locate(answers)
    assert located is not None
    missing = sorted(set(live) - set(answers))
    print(f"{len(answers)} of {len(live)} running ranks answered" + (f"; not: {missing}" if missing else ""))
    for group in located["groups"]:
        print(f"{group['label']}: {group['where']}")
        for thread in group["threads"] + group["own_threads"] if args.all_threads else group["threads"][:1]:
            print(f"  thread {thread['name']}{' (main)' if thread['main'] else ''}, innermost first:")
            for f in thread["frames"]:
                print(f"    {f['file']}:{f['line']} in {f['func']}")
    return 0


def _asked_ranks(text: str, live: dict[int, JsonObject]) -> list[int] | str:
    if text.strip().lower() == "all":
        return "all"
    try:
        asked = sorted({int(r) for r in text.split(",") if r.strip()})
    except ValueError:
        raise _targets.TargetError(f"--ranks {text!r}: use all, or rank numbers such as 0,3") from None
    if not set(asked) & set(live):
        raise _targets.TargetError(f"--ranks {text}: none of them is running (running: {sorted(live)})")
    return asked


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def _describe(rank: int, s: JsonObject) -> list[str]:
    """A rank's capture in a few lines: its trace, its breakdown, its top operators."""
    cut = f", {s['trace_events_cut']} events cut to fit" if s.get("trace_events_cut") else ""
    lines = [f"  rank {rank}: {s.get('trace_location')} ({s.get('trace_bytes', 0) / 1e6:.2f} MB{cut})"]
    b = s.get("breakdown") or {}
    shares = b.get("shares") or {}
    if shares:
        parts = ", ".join(f"{k} {_percent(v)}" for k, v in shares.items())
        overlap = b.get("overlap")
        hidden = (
            f"; communication hidden under computation: {_percent(overlap)}" if overlap is not None else ""
        )
        lines.append(f"    {'device' if b.get('device') else 'host'} time: {parts}{hidden}")
    ops = (s.get("operators") or {}).get("device" if b.get("device") else "host") or []
    if ops:
        lines.append(
            "    top operators: "
            + ", ".join(
                f"{o['name']} {o['self_cpu_ms' if not b.get('device') else 'self_device_ms']:.1f} ms"
                for o in ops[:5]
            )
        )
    return lines


def profile(args: argparse.Namespace, pick: Pick) -> int:
    """Ask the running ranks for a profile of their next steps; wait for the captures; say where
    their traces are."""
    target = pick(args.target)
    backend, title, data = _live(target, "profile")
    live = running_ranks(data)
    ranks = _asked_ranks(args.ranks, live)
    asked = sorted(live) if ranks == "all" else [r for r in ranks if r in live]
    attempt = max(int(s.get("attempt", 0)) for s in live.values())
    ident = f"p{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    entry = {"id": ident, "time": time.time(), "steps": args.steps, "ranks": ranks, "attempt": attempt}
    entry.update(shapes=args.shapes, stacks=args.with_stacks, trigger="request")
    requests.ask(backend, "profile", entry)
    print(
        f"asked {len(asked)} running rank(s) of {title} to profile {args.steps} steps (capture {ident})",
        flush=True,
    )
    names = {r: layout.profile_name(ident, r) for r in asked}
    found: dict[int, JsonObject] = {}
    deadline = time.monotonic() + args.wait
    while len(found) < len(asked) and time.monotonic() < deadline:
        time.sleep(1.0)
        fetched = backend.read_many([n for r, n in names.items() if r not in found])
        for r, n in names.items():
            if n in fetched and (s := rank_summary(fetched[n], backend)) is not None:
                found[r] = s
    if not found:
        raise _targets.TargetError(
            f"no rank captured its steps in {args.wait:g} s; a rank looks for the request every few "
            "seconds and starts at its next step end (a rank between steps, or stuck, answers late)"
        )
    steps = next((s["steps"] for s in found.values() if s.get("steps")), None)
    missing = sorted(set(asked) - set(found))
    print(
        f"captured steps {steps[0]}-{steps[1] if steps else '?'} on {len(found)} of {len(asked)} ranks"
        if steps
        else f"captured on {len(found)} of {len(asked)} ranks",
        end="",
    )
    print(f"; not: {missing}" if missing else "")
    for r in sorted(found):
        print("\n".join(_describe(r, found[r])))
    print(
        "open a trace in https://ui.perfetto.dev (or chrome://tracing); copy one with "
        f"`traincard export {args.target} --profile {ident} --rank {min(found)} -o trace.json.gz`"
    )
    return 0


def export_trace(backend: Backend, data: RunData, capture: str, rank: int | None, output: str) -> str:
    """Copy a capture's trace (the latest capture for ``latest``) to ``output``; returns what it copied."""
    if not data.profiles:
        raise _targets.TargetError("the run has no profile captures: `traincard profile` makes one")
    found = (
        data.profiles[-1]
        if capture == "latest"
        else next((c for c in data.profiles if c["id"] == capture), None)
    )
    if found is None:
        known = ", ".join(c["id"] for c in data.profiles[-5:])
        raise _targets.TargetError(f"no profile capture {capture!r} (the latest: {known})")
    ranks = found["ranks"]
    r = min(ranks) if rank is None else rank
    if r not in ranks:
        raise _targets.TargetError(f"capture {found['id']} has no trace of rank {r} (ranks {sorted(ranks)})")
    name = layout.trace_name(found["id"], r)
    raw = backend.read_many([name]).get(name)
    if raw is None:
        raise _targets.TargetError(f"the trace {location(backend, name)} is missing from the store")
    with open(output, "wb") as fh:
        fh.write(raw)
    return f"capture {found['id']}, rank {r}"
