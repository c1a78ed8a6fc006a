"""A Metaflow ``@parallel`` gang read as one run: every node's task store merged into one RunData.

Each node's task writes only its own objects. In its own store, ``gang.json`` says which gang it
belongs to; in the control task's store, ``gang/node-<i>.json`` (one object per node, written by
that node alone, never read-modify-written) says which task is node ``i``. Reading any task of the
gang finds the control task from ``gang.json``, the nodes from ``gang/``, and merges their stores:

* training ranks keep their global ``RANK`` (torchrun), each state tagged with its node; which
  state is a rank and which the node's launcher is decided by
  :func:`traincard_otel._analysis.gang.nodes.node_states`, which the control node's watchdog
  uses too;
* system series are the node's: tagged ``node=node <i>`` and attributed to the node's first rank;
* torch elastic agent records (``elastic/*.json``, from ``python -m traincard_otel.torchrun``)
  are kept per node.

What grows with ranks: one step-time series and one state per rank. What does not: metrics are
reported by rank 0 only, system series by one process per node.
"""

from __future__ import annotations

import dataclasses
import json

from ..._analysis.gang.nodes import node_states
from ..._data.rundata import RunData, Series
from ..._schema.keys import series_key
from ..._store.backends import Backend, node_markers, sibling_backend
from ..._store.layout import ELASTIC_PREFIX, GANG_FILE, NODE_PREFIX
from ..._types import JsonObject
from .columns import concat
from .reader import StoreReader


def read_marker(backend: Backend) -> JsonObject | None:
    raw = backend.read_many([GANG_FILE]).get(GANG_FILE)
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    return found if isinstance(found, dict) and "control_task_id" in found else None


@dataclasses.dataclass
class _Node:
    info: JsonObject
    reader: StoreReader
    backend: Backend


class GangReader:
    """Reads a whole gang, then only what is new in each node's store on each :meth:`read`."""

    def __init__(self, control: Backend, source: str) -> None:
        self.control, self.source = control, source
        self._nodes: dict[int, _Node] = {}

    @classmethod
    def for_task(cls, backend: Backend, source: str) -> GangReader | None:
        """A gang reader if ``backend`` is a task of a gang, else ``None``."""
        marker = read_marker(backend)
        if marker is None:
            return None
        control_id = str(marker["control_task_id"])
        control = backend if marker.get("task_id") == control_id else sibling_backend(backend, control_id)
        return cls(control, source)

    def _discover(self, names: list[str]) -> None:
        markers = [n for n in names if n.startswith(NODE_PREFIX) and n.endswith(".json")]
        for index, (info, backend) in node_markers(self.control, markers).items():
            if index not in self._nodes:
                self._nodes[index] = _Node(
                    info, StoreReader(backend, source=str(info.get("task_id"))), backend
                )

    def read(self) -> RunData:
        self._discover(self.control.list())
        parts = []
        for index in sorted(self._nodes):
            node = self._nodes[index]
            data = node.reader.read()
            agents = _agents(node.backend)
            parts.append((node.info, data, agents))
        control = self._nodes[min(self._nodes)].info if self._nodes else {}
        step_path = str(control.get("pathspec") or "").rsplit("/", 1)[0]
        return merge(step_path or self.source, parts)  # the gang's card is the step's, not a task's


def _agents(backend: Backend) -> list[JsonObject]:
    names = [n for n in backend.list() if n.startswith(ELASTIC_PREFIX) and n.endswith(".json")]
    out = []
    for raw in backend.read_many(names).values():
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return sorted(out, key=lambda a: a.get("started_at") or 0)


def _concat(a: Series, b: Series) -> Series:
    return Series(
        name=a.name,
        tags=a.tags,
        steps=concat(a.steps, b.steps),
        values=concat(a.values, b.values),
        times=concat(a.times, b.times),
        attempts=concat(a.attempts, b.attempts),
        ranks=concat(a.ranks, b.ranks),
    )


def merge(source: str, parts: list[tuple[JsonObject, RunData, list[JsonObject]]]) -> RunData:
    """One RunData for the gang; series are shared with the node readers, not copied."""
    out = RunData(source=source)
    nodes = []
    stats: JsonObject = {"segments": 0, "corrupt_segments": 0, "corrupt_names": [], "records": 0}
    dropped: dict[str, int] = {}
    for info, data, agents in parts:
        node = node_states(info, data.states)
        index = node.index
        out.states.extend(node.ranks)
        entry = node.entry(info, agents)
        first_rank = entry["ranks"][0] if entry["ranks"] else index
        for table, merged in (
            (data.metrics, out.metrics),
            (data.throughput, out.throughput),
        ):
            for key, series in table.items():
                merged[key] = _concat(merged[key], series) if key in merged else series
        for by_rank, merged_rank in ((data.step_times, out.step_times), (data.data_wait, out.data_wait)):
            for rank, series in by_rank.items():
                merged_rank[rank] = _concat(merged_rank[rank], series) if rank in merged_rank else series
        for rank, waited in data.data_wait_total.items():
            out.data_wait_total[rank] = out.data_wait_total.get(rank, 0.0) + waited
        for series in data.system.values():
            tags = {**series.tags, "node": f"node {index}"}
            view = dataclasses.replace(series, tags=tags, ranks=[first_rank] * len(series.values))
            key = series_key(series.name, {k: v for k, v in tags.items() if k != "unit"})
            out.system[key] = view
        kept = data.completions.rows()
        out.completions.add(kept)
        out.completions.seen += data.completions.seen - len(kept)  # what the node's reader sampled away
        for name in ("phases", "checkpoints", "logs", "events", "genai_spans"):
            getattr(out, name).extend({**r, "node_index": index} for r in getattr(data, name))
        for key in ("segments", "corrupt_segments", "records"):
            stats[key] += int(data.stats.get(key, 0))
        stats["corrupt_names"] += list(data.stats.get("corrupt_names", []))
        for reason, n in (data.stats.get("dropped") or {}).items():
            dropped[reason] = dropped.get(reason, 0) + int(n)
        nodes.append(entry)
    for key in ("events", "logs"):
        getattr(out, key).sort(key=lambda r: r.get("time") or 0)
    stats["dropped"] = dropped
    out.stats = stats
    num_nodes = max((int(i.get("num_nodes") or 0) for i, _d, _a in parts), default=0)
    out.gang = {
        "control_task_id": parts[0][0].get("control_task_id") if parts else None,
        "num_nodes": max(num_nodes, len(parts)),
        "nodes": nodes,
    }
    return out
