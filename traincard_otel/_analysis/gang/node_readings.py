"""A node's last system readings: the sampler's keys parsed, the figures people read as single
numbers (CPU, memory, each GPU), their sum over nodes, and memory evidence for the OOM killer."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..._data.rundata import Series
from ..._schema import Attr, SystemMetric
from ..._schema.keys import reading_key, series_key, split_reading_key
from ..._types import JsonObject, JsonValue

NEAR_LIMIT = 0.9


def host_oom_evidence(last_system: Mapping[str, JsonValue]) -> str | None:
    """A process that vanished (SIGKILL / exit 137) with memory near its limit: likely the OOM killer."""
    util_name = SystemMetric.MEMORY_UTILIZATION.name
    util = last_system.get(series_key(util_name, {Attr.MEMORY_STATE: "used"}), last_system.get(util_name))
    rss = last_system.get(SystemMetric.PROCESS_MEMORY_USAGE.name)
    limit = last_system.get(SystemMetric.MEMORY_LIMIT.name)
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


def node_last_readings(rows: list[JsonObject], system: Mapping[str, Series]) -> JsonObject:
    """The last readings of the node whose rank ``rows`` are given, where no launcher record of
    the node carries them (plain torchrun: one process of the node samples it for all): the
    ``last_system`` of the first of them, by local rank, that has one, else the latest value of
    each system series those ranks wrote."""
    for row in sorted(rows, key=lambda r: r.get("local_rank") or 0):
        if row.get("last_system"):
            return dict(row["last_system"])
    ranks = {row["rank"] for row in rows}
    out: JsonObject = {}
    for series in system.values():
        for value, rank in zip(reversed(series.values), reversed(series.ranks), strict=False):
            if rank in ranks and value == value:
                tags = {k: v for k, v in series.tags.items() if k not in ("unit", "node")}
                out[reading_key(series.name, tags)] = value
                break
    return out


_GPU_FIELDS = {
    SystemMetric.GPU_UTILIZATION.name: "utilization",
    SystemMetric.GPU_MEMORY_USAGE.name: "memory_used",
    SystemMetric.GPU_MEMORY_LIMIT.name: "memory_limit",
}


def node_system(last_system: JsonObject) -> JsonObject:
    """The node's latest readings that people read as single numbers."""
    out: JsonObject = {"gpus": []}
    gpus: dict[str, dict[str, float]] = {}
    for key, value in last_system.items():
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        name, hw_id, attrs = split_reading_key(key)
        if name == SystemMetric.CPU_UTILIZATION.name and not attrs:
            out["cpu_utilization"] = value
        elif name == SystemMetric.MEMORY_USAGE.name and attrs.get(Attr.MEMORY_STATE) in (None, "used"):
            out["memory_used"] = value
        elif name == SystemMetric.MEMORY_LIMIT.name:
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


def aggregates(nodes: list[JsonObject]) -> JsonObject:
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
