"""A gang's nodes from what each node's store holds: which states are ranks, which is the node's
launcher, and what the node's last system readings are.

A node's task store holds the states of its training ranks and of its Metaflow step process (the
node's *launcher*, named by the pid and host in the node's gang marker). The launcher is a rank
only where no training rank writes beside it (one process per node); otherwise its state is the
node's, not a rank's: it says whether the node's task still runs, and it samples the node. Pure:
the read side's gang reader (:mod:`traincard_otel._read.load.gang`) merges the nodes' series with
these decisions, and the control node's watchdog judges the gang's rank states with them
(:func:`gang_states`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..._data.rundata import RunData
from ..._types import JsonObject


def is_launcher(state: JsonObject, info: JsonObject) -> bool:
    """Whether ``state`` is the node's step process (``info``: the node's gang marker)."""
    return state.get("pid") == info.get("launcher_pid") and state.get("host") == info.get("host")


def latest(states: Sequence[JsonObject]) -> JsonObject | None:
    """The state of the latest attempt, the latest written of its equals."""
    return max(states, key=lambda s: (s.get("attempt", 0), s.get("updated_at") or 0)) if states else None


def _ranks_system(states: Sequence[JsonObject]) -> JsonObject:
    for s in sorted(states, key=lambda s: s.get("local_rank", 0)):
        if s.get("last_system"):
            return dict(s["last_system"])
    return {}


@dataclasses.dataclass(frozen=True)
class NodeStates:
    """One node's states, sorted out: its ranks' (tagged with the node), its launcher's latest."""

    index: int
    ranks: list[JsonObject]
    launcher: JsonObject | None  # None where the launcher is the node's one rank
    launcher_is_rank: bool
    last_system: JsonObject  # the launcher's last readings, else its first rank's that has some

    def entry(self, info: JsonObject, agents: list[JsonObject]) -> JsonObject:
        """The node as ``RunData.gang["nodes"]`` lists it (``agents``: torch elastic's records)."""
        return {
            "node_index": self.index,
            "task_id": info.get("task_id"),
            "host": info.get("host"),
            "launcher_pid": info.get("launcher_pid"),
            "launcher": self.launcher,
            "launcher_is_rank": self.launcher_is_rank,
            "ranks": sorted({int(s.get("rank", 0)) for s in self.ranks}),
            "agents": agents,
            "last_system": self.last_system,
        }


def node_states(info: JsonObject, states: Sequence[JsonObject]) -> NodeStates:
    """Sort one node's ``states`` (``info``: its gang marker) into ranks and launcher; each rank's
    state is tagged with the node's index and task (the states themselves, not copies)."""
    index = int(info["node_index"])
    launchers = [s for s in states if is_launcher(s, info)]
    ranks = [s for s in states if not is_launcher(s, info)]
    launcher_is_rank = not ranks  # one process per node: the step process trains
    if launcher_is_rank:
        ranks = list(states)
    for s in ranks:
        s["node_index"] = index
        s["task_id"] = info.get("task_id")
    last = latest(launchers)
    return NodeStates(
        index=index,
        ranks=ranks,
        launcher=None if launcher_is_rank else last,
        launcher_is_rank=launcher_is_rank,
        last_system=(last or {}).get("last_system") or _ranks_system(ranks),
    )


def gang_states(
    source: str, nodes: Sequence[tuple[JsonObject, Sequence[JsonObject]]], num_nodes: int
) -> RunData:
    """A gang as its rank states alone (``nodes``: each node's marker and states), what
    :func:`.attribution.analyze` needs to name hung ranks and the first failure while the gang
    runs: no series, no console, no agent records."""
    out = RunData(source=source)
    entries = []
    for info, states in nodes:
        node = node_states(info, [dict(s) for s in states])
        out.states.extend(node.ranks)
        entries.append(node.entry(info, []))
    out.gang = {
        "control_task_id": nodes[0][0].get("control_task_id") if nodes else None,
        "num_nodes": max(num_nodes, len(nodes)),
        "nodes": entries,
    }
    return out
