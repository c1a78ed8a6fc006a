"""A node's last system readings: the sampler's keys parsed, the figures people read as single
numbers (CPU, memory, each GPU), their sum over nodes, and memory evidence for the OOM killer."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ..._types import JsonObject, JsonValue

# The samplers' reading keys, ``name[hw.id]{attr=value,...}`` (telemetry._samples.Sample).
_READING_KEY = re.compile(r"^([^\[{]+)(?:\[([^\]]*)\])?(?:\{(.*)\})?$")


def split_reading_key(key: str) -> tuple[str, str | None, dict[str, str]]:
    m = _READING_KEY.match(key)
    if m is None:
        return key, None, {}
    attrs = dict(part.split("=", 1) for part in (m.group(3) or "").split(",") if "=" in part)
    return m.group(1), m.group(2), attrs


NEAR_LIMIT = 0.9


def host_oom_evidence(last_system: Mapping[str, JsonValue]) -> str | None:
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


_GPU_FIELDS = {
    "hw.gpu.utilization": "utilization",
    "hw.gpu.memory.usage": "memory_used",
    "hw.gpu.memory.limit": "memory_limit",
}


def node_system(last_system: JsonObject) -> JsonObject:
    """The node's latest readings that people read as single numbers."""
    out: JsonObject = {"gpus": []}
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
