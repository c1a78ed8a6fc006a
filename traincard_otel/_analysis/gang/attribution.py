"""Who failed first in a gang, who hung, who is slow: read from what every rank and node stored.

Pure functions of a :class:`~traincard_otel._data.rundata.RunData` (no I/O), applied by the gang
reader so that ``traincard_otel.load()``, the CLI and the card tell the same story:

* :mod:`.ranks`: one row per training rank (node, host, pid, status, last step and heartbeat,
  step time median and recent, data-wait share), stragglers and hung ranks;
* :mod:`.first_failure`: ranks ordered by when they ended; the first is the cause, the rest are
  consequences;
* :mod:`.node_readings`: each node's last system readings and memory evidence for the OOM killer;
* :func:`analyze` (here): all of it, with the last metrics and what a surviving node waits for.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..._types import JsonObject
from .first_failure import CLEAN_ENDS, OPEN, VANISHED, first_failure, panel_failure, sibling_ends
from .node_readings import aggregates, host_oom_evidence, node_last_readings, node_system
from .ranks import hung_ranks, latest_states, rank_table, stragglers
from .stacks import locate
from .torchrun_report import REPORT_MARK, agent_records

__all__ = ["analyze", "host_oom_evidence", "settle"]

LAST_METRICS = 12  # in the failure summary
_INTERNAL = ("last_system", "failure", "stacks")  # read by the analysis, not shown per rank

if TYPE_CHECKING:
    from ..._data.rundata import RunData
    from ..anatomy import Straggler


def _last_metrics(data: RunData) -> JsonObject:
    """The last point of each training metric: the very values the charts end with."""
    out: JsonObject = {}
    for key, series in sorted(data.metrics.items()):
        for i in range(len(series.values) - 1, -1, -1):
            v = series.values[i]
            if v == v:
                out[key] = {"step": series.steps[i], "value": v}
                break
        if len(out) >= LAST_METRICS:
            break
    return out


def _waits(nodes: list[JsonObject], rows: list[JsonObject], num_nodes: int) -> list[str]:
    """What a node whose own ranks are done (or not started) is waiting for."""
    by_node: dict[int, list[JsonObject]] = {}
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
        if mine and all(r["status"] in CLEAN_ENDS for r in mine):
            others = sorted(
                {
                    int(r["node"] or 0)
                    for r in rows
                    if r["status"] not in CLEAN_ENDS and int(r["node"] or 0) != index
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


def _with_console_reports(nodes: list[JsonObject], logs: list[JsonObject]) -> list[JsonObject]:
    """Nodes without an agent record (plain ``torchrun``, not ``traincard_otel.torchrun``) get one
    from torchrun's failure report in their captured console, where it printed one."""
    if all(n.get("agents") for n in nodes) or not any(
        REPORT_MARK in m for line in logs if isinstance(m := line.get("message"), str)
    ):
        return nodes
    out = []
    for n in nodes:
        if not n.get("agents"):
            index = int(n["node_index"])
            mine = [line for line in logs if int(line.get("node_index") or 0) == index]
            n = {**n, "agents": agent_records(mine, index)}
        out.append(n)
    return out


def analyze(data: RunData, now: float | None = None, straggler: Straggler | None = None) -> JsonObject | None:
    """Nodes, ranks, stragglers, the first failure, hung ranks and barrier waits of ``data``;
    ``None`` for a run with one rank and no gang. ``straggler``: the one the step anatomy found
    (:mod:`traincard_otel._analysis.anatomy`), which says which part makes it slow."""
    now = time.time() if now is None else now
    gang = data.gang or {}
    if not gang and len(latest_states(data)) < 2:
        return None  # (before the rank table: its step-time medians read every step)
    rows = rank_table(data, now)
    raw_nodes = gang.get("nodes") or [
        {"node_index": n, "task_id": None, "host": None, "agents": [], "launcher": None, "last_system": {}}
        for n in sorted({int(r["node"] or 0) for r in rows})
    ]
    raw_nodes = _with_console_reports(raw_nodes, data.logs)
    num_nodes = int(gang.get("num_nodes") or len(raw_nodes))
    attempt = max((int(s.get("attempt", 0)) for s in data.states), default=0)
    agents = [a for n in raw_nodes for a in n.get("agents") or []]
    seen = sibling_ends(data.states, attempt)
    ended_by_agent = {
        int(f["rank"])
        for a in agents
        if int(a.get("attempt") or 0) == attempt
        for f in a.get("failures") or []
    }
    hung = hung_ranks(rows, now, ended_by_agent | set(seen))
    nodes = []
    node_memory: dict[int, str | None] = {}
    nodes_last_system: dict[int, JsonObject] = {}
    for n in raw_nodes:
        index = int(n["node_index"])
        mine = [r for r in rows if int(r["node"] or 0) == index]
        last_system = n.get("last_system") or node_last_readings(mine, data.system)
        node_memory[index] = host_oom_evidence(last_system)
        nodes_last_system[index] = last_system
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
                "system": node_system(last_system),
            }
        )
    located = locate({r["rank"]: r["stacks"] for r in rows if r.get("stacks")})
    first = first_failure(rows, agents, node_memory, hung, attempt, seen, now, located)
    places = located.pop("places") if located is not None else {}
    if first is not None:  # a rank that ended is not running any more, whatever its state says
        ended = {c["rank"] for c in first["consequences"] if not c["hung"]}
        ended |= set() if first.get("hung") else {first["rank"]}
        for r in rows:
            if r["rank"] in ended and r["status"] in OPEN:
                r["status"] = "failed" if r.get("failure") else VANISHED
    waiting: list[JsonObject] = []
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
        "ranks": [
            {**{k: v for k, v in r.items() if k not in _INTERNAL}, "where": places.get(r["rank"])}
            for r in rows
        ],
        "stacks": located,
        "stragglers": {**stragglers(rows), "anatomy": _anatomy_straggler(straggler)},
        "first_failure": first,
        "hung": hung,
        "waiting": waiting,
        "waits": waits,
        "aggregates": aggregates(nodes),
    }
    section["failure"] = panel_failure(first, nodes_last_system) if first is not None else None
    return section


def _anatomy_straggler(found: Straggler | None) -> JsonObject | None:
    if found is None:
        return None
    return {
        "rank": found.rank,
        "median_rank": found.median_rank,
        "part": found.part,
        "slow_s": found.slow_s,
        "median_s": found.median_s,
        "ratio": found.own_ratio,
        "others_wait": found.others_wait,
        "text": found.text,
    }


def settle(data: RunData, now: float | None = None, straggler: Straggler | None = None) -> JsonObject | None:
    """:func:`analyze` ``data``, and keep the verdict in it: ``data.gang`` holds the summary and
    the first failure (``load().failure``), and the latest state of a rank that vanished or
    failed says so rather than "running". Returns the summary (None for a single rank)."""
    summary = analyze(data, now, straggler)
    if summary is None:
        return None
    data.gang["summary"] = summary
    data.gang["failure"] = summary["failure"]
    ended = {r["rank"]: r["status"] for r in summary["ranks"] if r["status"] in ("failed", VANISHED)}
    attempt = max((int(s.get("attempt", 0)) for s in data.states), default=0)
    for s in data.states:
        if int(s.get("attempt", 0)) == attempt and s.get("status") == "running":
            s["status"] = ended.get(int(s.get("rank", 0)), "running")
    return summary
