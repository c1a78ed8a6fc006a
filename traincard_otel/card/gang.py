"""The card's gang section: nodes, ranks, stragglers, the first failure and hung ranks.

Pure (no Metaflow, no I/O): built from the merged RunData of a ``@parallel`` gang
(:mod:`traincard_otel.store.gang`), or of any run with more than one rank. ``docs/card-payload.md``
describes the fields; ``card.js`` draws them in the gang panel.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..store.reader import RunData
from ..telemetry._samples import split_reading_key
from ..telemetry.failure import first_failure
from ..telemetry.health import host_oom_evidence, hung_ranks, rank_table, stragglers

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


def _last_metrics(data: RunData) -> dict[str, Any]:
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


def gang_section(data: RunData, now: float | None = None) -> dict[str, Any] | None:
    """The gang panel's data; ``None`` for a run with one rank and no gang."""
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
    for n in raw_nodes:
        index = int(n["node_index"])
        last_system = n.get("last_system") or {}
        node_memory[index] = host_oom_evidence(last_system)
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
        "waits": waits,
        "aggregates": _aggregates(nodes),
    }
    section["headline"] = headline(section)
    return section


def _clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "never"


def headline(section: dict[str, Any]) -> list[dict[str, str]]:
    """Banner lines for the gang: the first failure, hung ranks, the slowest rank, barrier waits."""
    out = []
    first = section.get("first_failure")
    if first is not None:
        text = (
            f"First failure: rank {first['rank']} on node {first['node']} ({first.get('host') or '?'}, "
            f"pid {first.get('pid')}) {first.get('how')} at step {first.get('step')}, "
            f"last heartbeat {_clock(first.get('heartbeat_at'))}"
        )
        later = first.get("consequences") or []
        if later:
            text += "; then " + "; ".join(f"rank {c['rank']} {c['how']}" for c in later[:8])
        out.append({"kind": "failed", "text": text})
    told = {first["rank"], *(c["rank"] for c in first.get("consequences") or [])} if first else set()
    for h in section.get("hung") or []:
        if h["rank"] in told:
            continue
        out.append(
            {
                "kind": "degraded",
                "text": f"Rank {h['rank']} on node {h['node']} is hung: no heartbeat for {h['age_s']:.0f} s "
                f"(last step {h['step']})",
            }
        )
    slow = (section.get("stragglers") or {}).get("slowest")
    if slow is not None:
        out.append(
            {
                "kind": "info",
                "text": f"Straggler: rank {slow['rank']} on node {slow['node']} takes {slow['ratio']:.1f}x "
                f"the other ranks' step time ({slow['recent_s']:.3g} s vs {slow['others_s']:.3g} s)",
            }
        )
    out.extend({"kind": "info", "text": w} for w in section.get("waits") or [])
    return out
