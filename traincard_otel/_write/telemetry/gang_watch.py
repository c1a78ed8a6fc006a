"""The control node's view of its ``@parallel`` gang: every node's rank states, judged as they come.

The control task's step process holds the gang's markers (``gang/node-<i>.json``, one per node,
written by that node's step process), which name each node's task store. Its watchdog reads every
node's rank states through them, as it reads its own node's for lost ranks (the store is the
control channel), and judges them with the gang analysis the card uses
(:func:`traincard_otel._analysis.gang.attribution.analyze`, on the states alone:
:func:`traincard_otel._analysis.gang.nodes.gang_states`). The first failure and each hung rank
become ``traincard.gang.first_failure`` / ``traincard.gang.rank_hung`` events in this process's
queue, once each, so the guard rails, the webhooks and OTLP see them, and the diagnosis feeds the
gang's gauges. One process per gang does this, so nothing is counted once per node.

What the states carry is what it knows: each rank's status, failure, heartbeat, stacks, the exit
statuses its siblings read, and each node's last system readings. The card also reads torch
elastic's agent records and torchrun's console report, so its diagnosis can say more (an exit code
that no sibling read: a node with one rank, or a sibling that was reaped first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..._analysis.gang.attribution import analyze
from ..._analysis.gang.nodes import gang_states
from ..._identity import GangIdentity, RankIdentity
from ..._schema import Attr, Event
from ..._store.backends import Backend, node_markers
from ..._store.layout import NODE_PREFIX
from ..._types import JsonObject, Reported
from .health import read_states
from .stack_watch import Emit


class GangWatch:
    """Reads the gang's rank states through the control task's markers and says what it finds."""

    def __init__(
        self,
        control: Backend,
        gang: GangIdentity,
        source: str,
        emit: Emit,
        publish: Callable[[JsonObject], None] | None = None,
    ) -> None:
        """``control``: the control task's store; ``emit`` records an event in this process's
        queue; ``publish`` takes each diagnosis (the gang's gauges)."""
        self._control, self._gang, self._source = control, gang, source
        self._emit, self._publish = emit, publish
        self._nodes: dict[int, tuple[JsonObject, Backend]] = {}
        self._told: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    @classmethod
    def on_control_node(
        cls,
        backend: Backend | None,
        rank: RankIdentity,
        emit: Emit,
        publish: Callable[[JsonObject], None] | None = None,
    ) -> GangWatch | None:
        """The watch of the gang whose control task's step process this is (None anywhere else)."""
        gang = rank.gang
        if backend is None or not rank.launcher or gang is None or gang.node_index != 0:
            return None
        return cls(backend, gang, gang.control_task_id, emit, publish)

    def _discover(self) -> None:
        """Read the markers of the nodes not known yet (by name: no listing)."""
        missing = [f"{NODE_PREFIX}{i}.json" for i in range(self._gang.num_nodes) if i not in self._nodes]
        self._nodes.update(node_markers(self._control, missing))

    def check(self, now: float | None = None) -> JsonObject | None:
        """Read every node's rank states, judge them, say what is new; returns the diagnosis."""
        with self._lock:
            self._discover()
            if not self._nodes:
                return None
            nodes = [(info, read_states(backend)) for _i, (info, backend) in sorted(self._nodes.items())]
            diagnosis = analyze(gang_states(self._source, nodes, self._gang.num_nodes), now)
            if diagnosis is None:
                return None
            self._events(diagnosis)
            if self._publish is not None:
                self._publish(diagnosis)
            return diagnosis

    def _events(self, diagnosis: JsonObject) -> None:
        """One event per first failure and per hung rank, for alert rules and the guard rails."""
        first = diagnosis.get("first_failure")
        found = [(Event.GANG_FIRST_FAILURE, first)] if first else []
        found += [(Event.GANG_RANK_HUNG, h) for h in diagnosis.get("hung") or []]
        for name, facts in found:
            key = (name, int(facts["rank"]))
            if key in self._told:
                continue
            self._told.add(key)
            self._emit(name, _attributes(name, facts))


def _attributes(name: str, facts: JsonObject) -> dict[str, Reported]:
    attrs: dict[str, Reported] = {
        Attr.RANK: int(facts["rank"]),
        Attr.GANG_NODE_INDEX: int(facts.get("node") or 0),
        Attr.HOST_NAME: str(facts.get("host") or ""),
        Attr.PROCESS_PID: int(facts.get("pid") or 0),
        Attr.STEP: int(facts["step"]) if facts.get("step") is not None else -1,
        Attr.GANG_HEARTBEAT_AT: float(facts.get("heartbeat_at") or 0.0),
    }
    if name == Event.GANG_FIRST_FAILURE:
        attrs[Attr.GANG_FAILURE_HOW] = str(facts.get("how") or "")
        if facts.get("signal"):
            attrs[Attr.SIGNAL] = int(facts["signal"])
        if facts.get("exit_code") is not None:
            attrs[Attr.PROCESS_EXIT_CODE] = int(facts["exit_code"])
        attrs[Attr.GANG_CONSEQUENCES] = [int(c["rank"]) for c in facts.get("consequences") or []]
    if facts.get("where"):  # where its stack says it is (a hung culprit: outside the collective)
        attrs[Attr.STACK_WHERE] = str(facts["where"])
    return attrs
