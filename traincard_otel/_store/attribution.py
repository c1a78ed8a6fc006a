"""Who failed first in a gang, who hung, who is slow: read from what every rank and node stored.

Pure functions of a :class:`~traincard_otel._store.reader.RunData` (no I/O), applied by the gang
reader so that ``traincard_otel.load()``, the CLI and the card tell the same story:

* :func:`rank_table`: one row per training rank (node, host, pid, status, last step and
  heartbeat, step time median and recent, data-wait share);
* :func:`stragglers`: the spread of step time and the slowest rank, named at ``STRAGGLER_FACTOR``;
* :func:`hung_ranks`: heartbeat older than the rank timeout while nothing says the rank ended;
* :func:`first_failure`: ranks ordered by when they ended; the first is the cause, the rest are
  consequences. How it ended comes from the elastic agent's record (exit code, signal) and the
  rank's own failure record (exception, traceback); SIGKILL is "likely the OOM killer" only with
  memory evidence from its node (:func:`host_oom_evidence`).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

# The samplers' reading keys, ``name[hw.id]{attr=value,...}`` (telemetry._samples.Sample).
_READING_KEY = re.compile(r"^([^\[{]+)(?:\[([^\]]*)\])?(?:\{(.*)\})?$")


def split_reading_key(key: str) -> tuple[str, str | None, dict[str, str]]:
    m = _READING_KEY.match(key)
    if m is None:
        return key, None, {}
    attrs = dict(part.split("=", 1) for part in (m.group(3) or "").split(",") if "=" in part)
    return m.group(1), m.group(2), attrs


NEAR_LIMIT = 0.9


def host_oom_evidence(last_system: Mapping[str, Any]) -> str | None:
    """A process that vanished (SIGKILL / exit 137) with memory near its limit: likely the OOM killer."""
    util = last_system.get(
        "system.memory.utilization{system.memory.state=used}", last_system.get("system.memory.utilization")
    )
    rss = last_system.get("process.memory.usage")
    limit = last_system.get("system.memory.limit")
    if (
        isinstance(rss, (int, float))
        and isinstance(limit, (int, float))
        and limit
        and rss / limit >= NEAR_LIMIT
    ):
        return f"process RSS {rss / 2**30:.1f} GiB of a {limit / 2**30:.1f} GiB limit in the last sample"
    if isinstance(util, (int, float)) and util >= NEAR_LIMIT:
        return f"host memory {util:.0%} used in the last sample"
    return None


# -- a whole gang, from what every rank and node wrote (pure; used by the card and the CLI) ------

STRAGGLER_FACTOR = 1.2  # a rank whose recent median step time is >= 1.2x the other ranks' median
STRAGGLER_MIN_STEPS = 5  # ... over at least this many steps, is named as the slowest
RECENT_STEPS = 20


def _latest_attempt_values(series: Any) -> Sequence[float]:
    """The set values of the series' latest attempt (a slice of its column: no copy per value
    unless a value is missing)."""
    attempts = series.attempts
    if not attempts:
        return []
    latest = attempts[-1]
    start = 0 if attempts[0] == latest else attempts.index(latest)
    values = series.values[start:]
    total = sum(values)
    if total == total:  # no NaN (a C-speed scan)
        return values  # type: ignore[no-any-return]
    return [v for v in values if v == v]


def _median(values: Sequence[float]) -> float | None:
    if not len(values):
        return None
    try:
        import numpy as np
    except ImportError:
        return float(statistics.median(values))
    return float(np.median(np.asarray(values, dtype=float)))  # an array('d') is read in place


def rank_table(data: Any, now: float) -> list[dict[str, Any]]:
    """One row per training rank of the latest attempt: where it runs, how far it got, its step
    time (median over the attempt and over the last ``RECENT_STEPS``) and its data-wait share."""
    if not data.states:
        return []
    latest = max(int(s.get("attempt", 0)) for s in data.states)
    by_rank: dict[int, dict[str, Any]] = {}
    for s in data.states:
        if int(s.get("attempt", 0)) != latest:
            continue
        r = int(s.get("rank", 0))
        if r not in by_rank or (s.get("started_at") or 0) >= (by_rank[r].get("started_at") or 0):
            by_rank[r] = s
    rows = []
    for r, s in sorted(by_rank.items()):
        durations = _latest_attempt_values(data.step_times[r]) if r in data.step_times else []
        waits = _latest_attempt_values(data.data_wait[r]) if r in data.data_wait else []
        total_d, total_w = sum(durations[-RECENT_STEPS:]), sum(waits[-RECENT_STEPS:])
        beat = float(s.get("heartbeat_at") or s.get("updated_at") or 0)
        rows.append(
            {
                "rank": r,
                "node": s.get("node_index", s.get("node_rank", 0)),
                "local_rank": s.get("local_rank"),
                "host": s.get("host"),
                "pid": s.get("pid"),
                "status": s.get("status", "unknown"),
                "step": s.get("step"),
                "heartbeat_at": beat or None,
                "heartbeat_age_s": now - beat if beat else None,
                "updated_at": s.get("updated_at"),
                "step_time_median_s": _median(durations),
                "step_time_recent_s": _median(durations[-RECENT_STEPS:]),
                "steps_timed": len(durations),
                # data wait is part of the step: its share of the recent steps' time
                "data_wait_share": total_w / total_d if waits and total_d > 0 else None,
                "failure": s.get("failure"),
                "terminated_by": s.get("terminated_by"),
                "rank_timeout_s": float(s.get("rank_timeout_s") or 120.0),
                "last_system": s.get("last_system") or {},
            }
        )
    return rows


def stragglers(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The spread of recent step times across ranks, and the slowest rank when it is at least
    ``STRAGGLER_FACTOR`` times the median of the others (over ``STRAGGLER_MIN_STEPS`` steps)."""
    timed = [
        r for r in rows if r["step_time_recent_s"] is not None and r["steps_timed"] >= STRAGGLER_MIN_STEPS
    ]
    out: dict[str, Any] = {"factor": STRAGGLER_FACTOR, "spread": None, "slowest": None}
    if len(timed) < 2:
        return out
    recent = [r["step_time_recent_s"] for r in timed]
    mid = _median(recent) or 0.0
    out["median_s"] = mid
    out["spread"] = (max(recent) - min(recent)) / mid if mid > 0 else None
    slow = max(timed, key=lambda r: r["step_time_recent_s"])
    others = _median([r["step_time_recent_s"] for r in timed if r is not slow]) or 0.0
    if others > 0 and slow["step_time_recent_s"] >= STRAGGLER_FACTOR * others:
        out["slowest"] = {
            "rank": slow["rank"],
            "node": slow["node"],
            "host": slow["host"],
            "recent_s": slow["step_time_recent_s"],
            "others_s": others,
            "ratio": slow["step_time_recent_s"] / others,
        }
    return out


def hung_ranks(rows: list[dict[str, Any]], now: float, ended: set[int]) -> list[dict[str, Any]]:
    """Ranks still marked running whose heartbeat is older than their rank timeout, and that no
    agent record says have ended: alive as far as anyone knows, but not progressing. A rank that
    has not finished a step yet (rendezvous, first compile) is not hung."""
    out = []
    for r in rows:
        age = r["heartbeat_age_s"]
        if r["step"] is None:
            continue
        if (
            r["status"] == "running"
            and r["rank"] not in ended
            and age is not None
            and age > r["rank_timeout_s"]
        ):
            out.append(
                {**{k: r[k] for k in ("rank", "node", "host", "pid", "step", "heartbeat_at")}, "age_s": age}
            )
    return out


# -- the first failure of a gang ---------------------------------------------------------------

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def _how_signal(signum: int, memory_evidence: str | None) -> str:
    name = _SIGNALS.get(signum, f"signal {signum}")
    if signum == 9:
        return "killed (signal 9), likely the OOM killer" if memory_evidence else "killed (signal 9, SIGKILL)"
    return f"ended by {name} (signal {signum})"


def elastic_failures(agents: list[dict[str, Any]], attempt: int) -> dict[int, dict[str, Any]]:
    """Global rank -> what torch elastic's agent recorded when that rank's process ended."""
    out: dict[int, dict[str, Any]] = {}
    for agent in agents:
        if int(agent.get("attempt") or 0) != attempt:
            continue
        for f in agent.get("failures") or []:
            out[int(f["rank"])] = {**f, "agent_node": agent.get("node_rank"), "host": agent.get("host")}
    return out


def _ending(
    row: dict[str, Any], elastic: dict[str, Any] | None, memory_evidence: str | None
) -> dict[str, Any] | None:
    """How one rank ended and when (the time used to order ranks), or None while it runs on."""
    failure = row.get("failure")
    beat = row.get("heartbeat_at") or 0.0
    out: dict[str, Any] = {"evidence": []}
    if elastic is not None:
        code = int(elastic.get("exitcode") or 0)
        out.update(exit_code=code, pid=elastic.get("pid") or row.get("pid"))
        out["evidence"].append(f"torch elastic agent: exit code {code} for pid {elastic.get('pid')}")
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
        out["time"] = float(beat or elastic.get("time") or 0)
        return out
    if row["status"] in ("failed", "finished"):
        return None if row["status"] == "finished" else {**out, "how": "failed", "time": beat}
    return None


def first_failure(
    rows: list[dict[str, Any]],
    agents: list[dict[str, Any]],
    node_memory: dict[int, str | None],
    hung: list[dict[str, Any]],
    attempt: int,
) -> dict[str, Any] | None:
    """The rank that failed first (its facts and how it ended) and the ranks that ended after it.

    Ranks are ordered by when they ended: the time of a recorded exception or signal, else (a
    process killed without a word, or hung) its last heartbeat, which comes before its end. The
    later ones are consequences: SIGTERM from the elastic agent, collectives failing or waiting.
    SIGKILL is called "likely the OOM killer" only with memory evidence from its node.
    """
    elastic = elastic_failures(agents, attempt)
    hung_by_rank = {h["rank"]: h for h in hung}
    ended = []
    for row in rows:
        memory = node_memory.get(int(row["node"] or 0))
        end = _ending(row, elastic.get(row["rank"]), memory)
        if end is None and row["rank"] in hung_by_rank:
            end = {"how": "hung (heartbeat stopped while its process lives)", "hung": True, "evidence": []}
            end["time"] = float(row.get("heartbeat_at") or 0)
        if end is not None:
            ended.append((end["time"], row["step"] if row["step"] is not None else -1, row, end))
    if not ended:
        return None
    ended.sort(key=lambda e: (e[0], e[1]))
    _t, _s, row, end = ended[0]
    facts = {k: row.get(k) for k in ("rank", "node", "host", "pid", "step", "heartbeat_at")}
    first = {**facts, **end, "pid": end.get("pid") or row.get("pid")}
    waiting = f"stopped after it, likely waiting for rank {row['rank']} in a collective"
    first["consequences"] = [
        {
            **{k: r.get(k) for k in ("rank", "node", "host", "step")},
            "how": waiting if e.get("hung") else e.get("how") or "ended",
            "time": e.get("time"),
        }
        for _t2, _s2, r, e in ended[1:]
    ]
    return first


LAST_METRICS = 12  # in the failure summary
_GPU_FIELDS = {
    "hw.gpu.utilization": "utilization",
    "hw.gpu.memory.usage": "memory_used",
    "hw.gpu.memory.limit": "memory_limit",
}


def _node_system(last_system: dict[str, Any]) -> dict[str, Any]:
    """The node's latest readings that people read as single numbers."""
    out: dict[str, Any] = {"gpus": []}
    gpus: dict[str, dict[str, float]] = {}
    for key, value in last_system.items():
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        name, hw_id, attrs = split_reading_key(key)
        if name == "system.cpu.utilization" and not attrs:
            out["cpu_utilization"] = value
        elif name == "system.memory.usage" and attrs.get("system.memory.state") in (None, "used"):
            out["memory_used"] = value
        elif name == "system.memory.limit":
            out["memory_limit"] = value
        elif hw_id and name in _GPU_FIELDS:
            gpus.setdefault(hw_id, {})[_GPU_FIELDS[name]] = value
    for hw_id in sorted(gpus, key=lambda h: (len(h), h)):
        g = gpus[hw_id]
        out["gpus"].append(
            {
                "id": hw_id,
                "utilization": g.get("utilization"),
                "memory_used": g.get("memory_used"),
                "memory_limit": g.get("memory_limit"),
            }
        )
    return out


def _aggregates(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    systems = [n["system"] for n in nodes]
    gpus = [g for s in systems for g in s["gpus"]]
    cpus = [s["cpu_utilization"] for s in systems if "cpu_utilization" in s]
    util = [g["utilization"] for g in gpus if g["utilization"] is not None]
    return {
        "cpu_utilization_mean": sum(cpus) / len(cpus) if cpus else None,
        "memory_used_total": sum(s.get("memory_used", 0) for s in systems) if systems else None,
        "gpus": len(gpus),
        "gpu_utilization_mean": sum(util) / len(util) if util else None,
        "gpu_memory_used_total": sum(g["memory_used"] or 0 for g in gpus) if gpus else None,
    }


def _last_metrics(data: Any) -> dict[str, Any]:
    """The last point of each training metric: the very values the charts end with."""
    out: dict[str, Any] = {}
    for key, series in sorted(data.metrics.items()):
        for i in range(len(series.values) - 1, -1, -1):
            v = series.values[i]
            if v == v:
                out[key] = {"step": series.steps[i], "value": v}
                break
        if len(out) >= LAST_METRICS:
            break
    return out


def _waits(nodes: list[dict[str, Any]], rows: list[dict[str, Any]], num_nodes: int) -> list[str]:
    """What a node whose own ranks are done (or not started) is waiting for."""
    by_node: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_node.setdefault(int(r["node"] or 0), []).append(r)
    out = []
    for node in nodes:
        index = int(node["node_index"])
        mine = by_node.get(index, [])
        agent = node["agents"][-1] if node["agents"] else None
        alive = (agent is not None and agent.get("ended_at") is None) or (
            agent is None and (node.get("launcher") or {}).get("status") == "running"
        )
        if not alive:
            continue
        if mine and all(r["status"] == "finished" for r in mine):
            others = sorted(
                {
                    int(r["node"] or 0)
                    for r in rows
                    if r["status"] != "finished" and int(r["node"] or 0) != index
                }
            )
            if others:
                timeout = (agent or {}).get("exit_barrier_timeout_s", 300.0)
                out.append(
                    f"node {index}: its ranks finished; torch elastic's agent waits at its exit barrier "
                    f"(up to {timeout:.0f} s) for node {', '.join(map(str, others))}"
                )
        elif not mine:
            joined = sorted(by_node)
            out.append(
                f"node {index}: no rank has reported yet; rendezvous waits for all {num_nodes} nodes"
                + (f" (nodes {', '.join(map(str, joined))} reported)" if joined else "")
            )
    return out


def analyze(data: Any, now: float | None = None) -> dict[str, Any] | None:
    """Nodes, ranks, stragglers, the first failure, hung ranks and barrier waits of ``data``;
    ``None`` for a run with one rank and no gang."""
    now = time.time() if now is None else now
    rows = rank_table(data, now)
    gang = data.gang or {}
    if not gang and len(rows) < 2:
        return None
    raw_nodes = gang.get("nodes") or [
        {"node_index": n, "task_id": None, "host": None, "agents": [], "launcher": None, "last_system": {}}
        for n in sorted({int(r["node"] or 0) for r in rows})
    ]
    num_nodes = int(gang.get("num_nodes") or len(raw_nodes))
    attempt = max((int(s.get("attempt", 0)) for s in data.states), default=0)
    agents = [a for n in raw_nodes for a in n.get("agents") or []]
    ended_by_agent = {
        int(f["rank"])
        for a in agents
        if int(a.get("attempt") or 0) == attempt
        for f in a.get("failures") or []
    }
    hung = hung_ranks(rows, now, ended_by_agent)
    nodes = []
    node_memory: dict[int, str | None] = {}
    nodes_last_system: dict[int, dict[str, Any]] = {}
    for n in raw_nodes:
        index = int(n["node_index"])
        last_system = n.get("last_system") or {}
        node_memory[index] = host_oom_evidence(last_system)
        nodes_last_system[index] = last_system
        mine = [r for r in rows if int(r["node"] or 0) == index]
        launcher = n.get("launcher") or {}
        nodes.append(
            {
                "node_index": index,
                "task_id": n.get("task_id"),
                "host": n.get("host") or next((r["host"] for r in mine if r["host"]), None),
                "ranks": [r["rank"] for r in mine],
                "launcher_status": launcher.get("status"),
                "agents": n.get("agents") or [],
                "launcher": launcher,
                "system": _node_system(last_system),
            }
        )
    first = first_failure(rows, agents, node_memory, hung, attempt)
    waiting: list[dict[str, Any]] = []
    if first is not None and first.get("hung"):  # the others stopped in a collective, waiting for it
        waiting = [h for h in hung if h["rank"] != first["rank"]]
        hung = [h for h in hung if h["rank"] == first["rank"]]
    if first is not None:
        first["last_metrics"] = _last_metrics(data)
    world = max(
        [len(rows)] + [int(s.get("world_size") or 0) for s in data.states if s.get("attempt", 0) == attempt]
    )
    waits = _waits(nodes, rows, num_nodes)
    for node in nodes:  # agent records and launcher states were only needed for the analysis
        node.pop("agents")
        node.pop("launcher")
    section = {
        "world_size": world,
        "num_nodes": num_nodes,
        "nodes": nodes,
        "ranks": [{k: v for k, v in r.items() if k not in ("last_system", "failure")} for r in rows],
        "stragglers": stragglers(rows),
        "first_failure": first,
        "hung": hung,
        "waiting": waiting,
        "waits": waits,
        "aggregates": _aggregates(nodes),
    }
    section["failure"] = panel_failure(first, nodes_last_system) if first is not None else None
    return section


def panel_failure(first: dict[str, Any], last_system: dict[int, dict[str, Any]]) -> dict[str, Any]:
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
