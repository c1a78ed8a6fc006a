"""The first failure of a gang: ranks ordered by when they ended; the first is the cause, the
rest are consequences. How it ended comes from the launcher's report (torch elastic's agent
record or its console report: exit code, signal), from the exit status a sibling rank on its node
read as it ended, and from the rank's own failure record (exception, traceback); SIGKILL is
"likely the OOM killer" only with memory evidence from its node.

A rank that left no terminal record has *vanished* (ended without a word: SIGKILL, a crash in
native code, a lost machine) when a sibling saw its process end, or when another rank ended after
its last sign of life and it has not written since for longer than a live rank ever is silent
(``SILENT_FLUSHES`` of its flush interval). It ended after its last heartbeat: it is ordered there.
:func:`panel_failure` gives the first failure the shape of a rank's own failure record, for the
card's failure panel and ``load().failure``."""

from __future__ import annotations

from ..._types import JsonObject
from .stacks import rank_list

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
SILENT_FLUSHES = 2.0  # a live rank writes its state every flush interval; this many missed ...
SILENT_MARGIN_S = 1.0  # ... plus this, and it is not alive any more
VANISHED = "vanished"  # the status shown for a rank that ended without a terminal record
OPEN = ("running", VANISHED)  # no terminal record written
CLEAN_ENDS = ("finished", "stopped_early")  # a stop_on rule's stop is no failure


def sibling_ends(states: list[JsonObject], attempt: int) -> dict[int, JsonObject]:
    """Global rank -> how it ended as a sibling rank on its node saw it (the earliest sighting
    with an exit status, else the earliest)."""
    out: dict[int, JsonObject] = {}
    for s in states:
        if int(s.get("attempt", 0)) != attempt:
            continue
        for seen in s.get("ended_siblings") or []:
            rank = int(seen["rank"])
            known = out.get(rank)
            better = known is None or (seen.get("exitcode") is not None, -(seen.get("time") or 0)) > (
                known.get("exitcode") is not None,
                -(known.get("time") or 0),
            )
            if better:
                out[rank] = {**seen, "seen_by": s.get("rank"), "host": s.get("host")}
    return out


def as_agent_record(seen: dict[int, JsonObject], attempt: int) -> JsonObject:
    """The failures siblings saw, in the shape of an agent record (only non-zero exits fail)."""
    failures = [
        {
            **f,
            "reporter": f"rank {f.get('seen_by')} on its node read its exit status as it ended",
        }
        for f in seen.values()
        if f.get("exitcode")
    ]
    return {"attempt": attempt, "failures": failures, "source": "a sibling rank"}


def _how_signal(signum: int, memory_evidence: str | None) -> str:
    name = _SIGNALS.get(signum, f"signal {signum}")
    if signum == 9:
        return "killed (signal 9), likely the OOM killer" if memory_evidence else "killed (signal 9, SIGKILL)"
    return f"ended by {name} (signal {signum})"


def elastic_failures(agents: list[JsonObject], attempt: int) -> dict[int, JsonObject]:
    """Global rank -> what torch elastic's agent recorded when that rank's process ended."""
    out: dict[int, JsonObject] = {}
    for agent in agents:
        if int(agent.get("attempt") or 0) != attempt:
            continue
        for f in agent.get("failures") or []:
            out[int(f["rank"])] = {
                **f,
                "agent_node": agent.get("node_rank"),
                "host": f.get("host") or agent.get("host"),
                "source": agent.get("source"),
            }
    return out


def _ending(row: JsonObject, elastic: JsonObject | None, memory_evidence: str | None) -> JsonObject | None:
    """How one rank ended and when (the time used to order ranks), or None while it runs on."""
    failure = row.get("failure")
    beat = row.get("heartbeat_at") or 0.0
    out: JsonObject = {"evidence": []}
    if elastic is not None:
        code = int(elastic.get("exitcode") or 0)
        out.update(exit_code=code, pid=elastic.get("pid") or row.get("pid"))
        source = f" ({elastic['source']})" if elastic.get("source") else ""
        who = elastic.get("reporter") or f"torch elastic agent{source}"
        out["evidence"].append(f"{who}: exit code {code} for pid {elastic.get('pid')}")
        if elastic.get("seen_at_step") is not None:
            out["evidence"].append(
                f"rank {elastic.get('seen_by')} was at step {elastic['seen_at_step']} then"
            )
        if code < 0:
            out.update(signal=-code, how=_how_signal(-code, memory_evidence))
            if -code == 9 and memory_evidence:
                out["evidence"].append(memory_evidence)
        elif failure is None:
            out["how"] = f"exited with code {code}"
            if elastic.get("traceback"):
                out.update(traceback=elastic["traceback"], message=elastic.get("message"))
    if failure:
        out.update(
            how=out.get("how") if out.get("signal") else f"raised {failure.get('type')}",
            exception_type=failure.get("type"),
            message=failure.get("message"),
            traceback=failure.get("traceback"),
            verdict=failure.get("verdict"),
            time=float(failure.get("time") or beat),
        )
        return out
    if row["status"] == "terminated":
        by = str(row.get("terminated_by") or "a signal")
        out.update(how=out.get("how") or f"terminated by {by}", time=float(row.get("updated_at") or beat))
        return out
    if elastic is not None:
        # It died without writing its end (SIGKILL cannot be caught): it ended after its last word.
        out.update(time=float(beat or elastic.get("time") or 0), vanished=row["status"] in OPEN)
        return out
    if row["status"] in ("failed", *CLEAN_ENDS):
        return None if row["status"] in CLEAN_ENDS else {**out, "how": "failed", "time": beat}
    return None


def _end_time(row: JsonObject) -> float | None:
    """When a rank with a terminal record ended (None while it runs)."""
    if row["status"] in OPEN:
        return None
    failure = row.get("failure") or {}
    return float(failure.get("time") or row.get("updated_at") or row.get("heartbeat_at") or 0) or None


def _vanished(
    row: JsonObject, rows: list[JsonObject], seen: JsonObject | None, now: float
) -> JsonObject | None:
    """How a rank still marked running ended without a word, or None if it may be alive."""
    beat = float(row.get("heartbeat_at") or 0)
    alive_at = max(beat, float(row.get("updated_at") or 0))
    out: JsonObject = {
        "how": "vanished without a terminal record",
        "vanished": True,
        "time": beat or alive_at,
    }
    if seen is not None:
        code = seen.get("exitcode")
        status = "exit status not read" if code is None else f"exit code {code}"
        out["evidence"] = [
            f"rank {seen.get('seen_by')} saw its process (pid {seen.get('pid')}) end; {status}"
        ]
        if seen.get("seen_at_step") is not None:
            out["evidence"].append(f"rank {seen.get('seen_by')} was at step {seen['seen_at_step']} then")
        return out
    silent_for = SILENT_FLUSHES * float(row.get("flush_interval_s") or 2.0) + SILENT_MARGIN_S
    later = [t for r in rows if r is not row and (t := _end_time(r)) is not None and t > alive_at]
    if not later or now - alive_at <= silent_for:
        return None
    every = float(row.get("flush_interval_s") or 2.0)
    out["evidence"] = [
        f"no state written for {now - alive_at:.0f} s (a live rank writes every {every:g} s); "
        f"another rank ended {min(later) - alive_at:.1f} s after its last sign of life"
    ]
    return out


def _hung(row: JsonObject, located: JsonObject | None, culprits: set[int], waiting: set[int]) -> JsonObject:
    """How a hung rank ended, with where its stack says it is."""
    end: JsonObject = {
        "how": "hung (heartbeat stopped while its process lives)",
        "hung": True,
        "evidence": [],
        "time": float(row.get("heartbeat_at") or 0),
    }
    place = (located or {}).get("places", {}).get(row["rank"])
    if place is None:
        return end
    end["where"] = place
    op = (located or {}).get("collective")
    if row["rank"] in culprits:
        verb = "waits" if len(waiting) == 1 else "wait"
        end["how"] = f"hung {place}, not in a collective while {rank_list(sorted(waiting))} {verb} in {op}"
        end["culprit"] = True
        others = sorted((located or {})["places"].items())
        end["evidence"] = [f"its stack: {place}", *[f"rank {r}: {p}" for r, p in others if r in waiting][:4]]
        recorded = (located or {}).get("flight_recorder")
        if recorded and row["rank"] in recorded["not_joined"]:
            end["evidence"].append(f"flight recorder: {recorded['text']}")
    elif row["rank"] in waiting:
        end["waiting"] = f"{place} for {rank_list(sorted(culprits))}"
    else:
        end["how"] = f"hung {place}"
    return end


def first_failure(
    rows: list[JsonObject],
    agents: list[JsonObject],
    node_memory: dict[int, str | None],
    hung: list[JsonObject],
    attempt: int,
    seen: dict[int, JsonObject] | None = None,
    now: float = 0.0,
    located: JsonObject | None = None,
) -> JsonObject | None:
    """The rank that failed first (its facts and how it ended) and the ranks that ended after it.

    Ranks are ordered by when they ended: the time of a recorded exception or signal, else (a
    process killed without a word, or hung) its last heartbeat, which comes before its end. The
    later ones are consequences: SIGTERM from the elastic agent, collectives failing or waiting.
    ``seen``: how ranks ended as their siblings saw it (:func:`sibling_ends`); ``now``: the time
    the run is read at. SIGKILL is called "likely the OOM killer" only with memory evidence from
    its node. ``located`` (:func:`.stacks.locate`): where the ranks' stacks say they are; a hung
    rank stuck outside a collective while the others wait in one comes first, whatever the
    heartbeats say (every rank of a hung gang stops at the same step).
    """
    seen = seen or {}
    culprits = set((located or {}).get("culprits") or [])
    waiting_in = set((located or {}).get("waiting") or [])
    elastic = {
        **elastic_failures([as_agent_record(seen, attempt)], attempt),
        **elastic_failures(agents, attempt),
    }
    hung_by_rank = {h["rank"]: h for h in hung}
    ended = []
    for row in rows:
        memory = node_memory.get(int(row["node"] or 0))
        end = _ending(row, elastic.get(row["rank"]), memory)
        if end is None and row["status"] in OPEN and row["rank"] not in hung_by_rank:
            end = _vanished(row, rows, seen.get(row["rank"]), now)
        if end is None and row["rank"] in hung_by_rank:
            end = _hung(row, located, culprits, waiting_in)
        if end is not None:
            ended.append((end["time"], row["step"] if row["step"] is not None else -1, row, end))
    if not ended:
        return None
    hung_culprits = [e[0] for e in ended if e[2]["rank"] in culprits and e[3].get("hung")]
    if hung_culprits:  # the ranks waiting for a culprit stopped because of it: they come after
        ended = [
            (max(e[0], max(hung_culprits)), e[1], e[2], e[3])
            if e[3].get("hung") and e[2]["rank"] in waiting_in
            else e
            for e in ended
        ]
    ended.sort(key=lambda e: (e[0], e[2]["rank"] in waiting_in, e[1]))
    _t, _s, row, end = ended[0]
    facts = {k: row.get(k) for k in ("rank", "node", "host", "pid", "step", "heartbeat_at")}
    first = {**facts, **end, "pid": end.get("pid") or row.get("pid")}
    waiting = f"stopped after it, likely waiting for rank {row['rank']} in a collective"
    first["consequences"] = [
        {
            **{k: r.get(k) for k in ("rank", "node", "host", "step")},
            "how": (e.get("waiting") or waiting) if e.get("hung") else e.get("how") or "ended",
            "time": e.get("time"),
            "hung": bool(e.get("hung")),  # alive but not progressing: it has not ended
            "vanished": bool(e.get("vanished")),
            "signal": e.get("signal"),
        }
        for _t2, _s2, r, e in ended[1:]
    ]
    return first


def panel_failure(first: JsonObject, last_system: dict[int, JsonObject]) -> JsonObject:
    """The first failure in the shape of a rank's own failure record (the card's failure panel,
    ``load().failure``): the cause, not the consequence a surviving rank raised."""
    where = (
        f"rank {first['rank']} on node {first['node']} ({first.get('host') or '?'}, pid {first.get('pid')})"
    )
    later = first.get("consequences") or []
    message = f"{where} {first.get('how')} at step {first.get('step')}"
    if later:
        message += f"; {len(later)} rank(s) ended after it: " + ", ".join(str(c["rank"]) for c in later)
    verdict = first.get("verdict") or {}
    if first.get("signal") == 9 and "OOM" in str(first.get("how")):
        verdict = {
            "kind": "host_oom",
            "text": "Likely killed by the kernel's OOM killer",
            "evidence": first["evidence"],
        }
    elif first.get("culprit"):
        verdict = {
            "kind": "hung",
            "text": "Hung outside a collective while the other ranks wait for it in one",
            "evidence": first["evidence"],
        }
    elif first.get("hung"):
        verdict = {
            "kind": "hung",
            "text": "Hung: its heartbeat stopped while its process lives (a stuck collective or loop)",
            "evidence": [f"last heartbeat at step {first.get('step')}"],
        }
    elif not verdict.get("kind"):
        verdict = {"kind": None, "text": str(first.get("how") or ""), "evidence": first.get("evidence") or []}
    return {
        "type": first.get("exception_type")
        or ("Hung rank" if first.get("hung") else f"Rank {first['rank']}"),
        "message": message if not first.get("message") else f"{message}: {first['message']}",
        "traceback": first.get("traceback") or "",
        "time": first.get("time"),
        "step": first.get("step"),
        "phase": None,
        "rank": first["rank"],
        "node": first["node"],
        "last_metrics": {k: v["value"] for k, v in (first.get("last_metrics") or {}).items()},
        "last_system": last_system.get(int(first["node"] or 0), {}),
        "verdict": verdict,
    }
