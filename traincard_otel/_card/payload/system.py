"""The system section: host and GPU charts by time (per node, with a total across nodes), the
latest-readings tiles, and the sampler's notes in words a user can act on."""

from __future__ import annotations

import re

from ..._schema import SYSTEM_METRICS, Attr
from ..._store.reader import RunData, Series
from ..._store.time_order import in_time_order
from ..._telemetry._samples import split_reading_key
from ..._types import JsonObject
from .series import Mode, subset, xy

Chart = JsonObject

# The torch allocator's gauge: the system metric whose attributes carry the memory kind.
TORCH_MEMORY = next(m.name for m in SYSTEM_METRICS if Attr.TORCH_MEMORY_KIND in m.attributes)

SYSTEM_CHARTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    # (chart id, title, unit, metric names)
    ("cpu", "CPU utilization", "%", ("system.cpu.utilization", "process.cpu.utilization")),
    ("memory", "Memory used", "GB", ("system.memory.usage", "process.memory.usage", "system.memory.limit")),
    ("disk", "Disk throughput", "MB/s", ("system.disk.io",)),
    ("network", "Network throughput", "MB/s", ("system.network.io",)),
    ("gpu_util", "GPU utilization", "%", ("hw.gpu.utilization",)),
    (
        "gpu_mem",
        "GPU memory used",
        "GB",
        ("hw.gpu.memory.usage", "hw.gpu.memory.limit", TORCH_MEMORY),
    ),
    ("gpu_temp", "GPU temperature", "°C", ("hw.temperature",)),
    ("gpu_power", "GPU power", "W", ("hw.power",)),
]
RATIO_METRICS = ("system.cpu.utilization", "process.cpu.utilization", "hw.gpu.utilization")
_RATE_METRICS = {"system.disk.io", "system.network.io"}
_SCALE = {"%": 100.0, "GB": 1e-9, "MB/s": 1e-6}
_AVERAGED = set(RATIO_METRICS)
_LABEL_SKIP = {"unit", "hw.name", "hw.vendor", "hw.type", "hw.gpu.task"}

# The latest-readings tiles: (metric, attributes it must carry, label); GPU labels get "gpu0 " first.
_TILES: list[tuple[str, dict[str, str], str]] = [
    ("system.cpu.utilization", {}, "CPU"),
    ("process.cpu.utilization", {}, "CPU, this process"),
    ("system.memory.usage", {"system.memory.state": "used"}, "Memory used"),
    ("system.memory.limit", {}, "Memory total"),
    ("process.memory.usage", {}, "Memory, this process"),
    ("hw.gpu.utilization", {}, "utilization"),
    ("hw.gpu.memory.usage", {}, "memory used"),
    ("hw.gpu.memory.limit", {}, "memory total"),
    (TORCH_MEMORY, {Attr.TORCH_MEMORY_KIND: "peak"}, "torch peak"),
    ("hw.temperature", {}, "temperature"),
    ("hw.power", {}, "power"),
    ("hw.errors", {"error.type": "uncorrected"}, "uncorrected ECC errors"),
]

# NVML's error classes, as the sampler may quote them, in words.
_NVML_REASONS = {
    "LibraryNotFound": "no NVIDIA driver found",
    "DriverNotLoaded": "no NVIDIA driver found",
    "NoPermission": "no permission to read the NVIDIA driver",
    "InsufficientPermissions": "no permission to read the NVIDIA driver",
    "Uninitialized": "the NVIDIA driver did not start",
}
_QUOTED_EXC = re.compile(r"\((?:pynvml\.)?(?:NVMLError_)?(\w+?)(?:Error)?: ([^()]*)\)")


def readable_note(note: str) -> str:
    """A sampler note without Python exception names: ``(NVMLError_LibraryNotFound: ...)`` becomes
    "no NVIDIA driver found"."""

    def words(match: re.Match[str]) -> str:
        reason = _NVML_REASONS.get(match.group(1))
        return f"({reason})" if reason else f"({match.group(2).strip() or match.group(1)})"

    return _QUOTED_EXC.sub(words, note)


def _rate(series: Series) -> Series:
    out = Series(name=series.name, tags=series.tags)
    for i in range(1, len(series.values)):
        dt = series.times[i] - series.times[i - 1]
        dv = series.values[i] - series.values[i - 1]
        if dt > 0 and dv >= 0 and series.attempts[i] == series.attempts[i - 1]:
            out.times.append(series.times[i])
            out.values.append(dv / dt)
            out.steps.append(None)
            out.attempts.append(series.attempts[i])
            out.ranks.append(series.ranks[i])
    return out


def _label(series: Series, node: str | None) -> str:
    tags = {k: v for k, v in series.tags.items() if k not in _LABEL_SKIP}
    parts = [series.name.split(".")[0] if series.name.startswith(("process.", "system.")) else ""]
    parts += [v for _k, v in sorted(tags.items())]
    if series.name == TORCH_MEMORY:  # the allocator's view beside the driver's
        parts.insert(-1, "torch")  # "gpu0 torch peak"
    if series.name.endswith(".limit"):
        parts.append("limit")
    if node:
        parts.insert(0, node)
    return " ".join(p for p in parts if p) or series.name


def _node_names(data: RunData) -> dict[int, str]:
    """Sampling rank -> node label (host name, else the rank)."""
    return {int(st.get("rank", 0)): str(st.get("host") or f"rank {st.get('rank', 0)}") for st in data.states}


def _total(per_node: list[tuple[str, list[float], list[float | None]]], name: str) -> JsonObject:
    """Sum (or mean, for utilizations) across nodes, aligned on whole seconds."""
    buckets: dict[int, list[float]] = {}
    for _node, xs, ys in per_node:
        for x, y in zip(xs, ys, strict=False):
            if y is not None:
                buckets.setdefault(round(x), []).append(y)
    keys = sorted(k for k, v in buckets.items() if len(v) == len(per_node))
    mean = name in _AVERAGED
    return {
        "label": "all nodes" + (" (mean)" if mean else " (total)"),
        "x": keys,
        "y": [sum(buckets[k]) / len(buckets[k]) if mean else sum(buckets[k]) for k in keys],
    }


def system_charts(data: RunData, mode: Mode) -> list[Chart]:
    """One chart per entry of ``SYSTEM_CHARTS`` that has data; per node when several nodes sample."""
    nodes = _node_names(data)
    multi_node = len({r for s in data.system.values() for r in s.ranks}) > 1
    out = []
    for chart_id, title, unit, names in SYSTEM_CHARTS:
        scale = _SCALE.get(unit, 1.0)
        series_out: list[JsonObject] = []
        by_metric: dict[tuple[str, str], list[tuple[str, list[float], list[float | None]]]] = {}
        for _key, series in sorted(data.system.items()):
            if series.name not in names:
                continue
            if series.name == "system.memory.usage" and series.tags.get("system.memory.state") not in (
                None,
                "used",
            ):
                continue
            for rank in sorted(set(series.ranks)) if multi_node else [None]:
                part = in_time_order(
                    series
                    if rank is None
                    else subset(series, [i for i, r in enumerate(series.ranks) if r == rank])
                )
                if mode.live:  # rates need one point before the tail
                    part = subset(part, range(max(0, len(part) - mode.tail - 1), len(part)))
                s = _rate(part) if part.name in _RATE_METRICS else part
                xs, ys = xy(s, mode, by="time")
                ys = [None if y is None else y * scale for y in ys]
                label = _label(series, nodes.get(rank, f"rank {rank}") if rank is not None else None)
                series_out.append({"label": label, "x": xs, "y": ys})
                if rank is not None and series.name.startswith(("system.", "hw.gpu.utilization")):
                    by_metric.setdefault((series.name, _label(series, None)), []).append((label, xs, ys))
        for (name, base), per_node in by_metric.items():
            if len(per_node) > 1:
                total = _total(per_node, name)
                total["label"] = f"{base} {total['label']}"
                series_out.append(total)
        if series_out:
            out.append(
                {
                    "id": chart_id,
                    "title": title,
                    "group": "system",
                    "unit": unit,
                    "x": "time",
                    "series": series_out,
                }
            )
    return out


def system_section(data: RunData) -> JsonObject:
    """Notes (why figures are missing), the latest-readings tiles, and each metric's unit."""
    notes: list[str] = []
    for s in data.states:
        for note in s.get("notes") or []:
            text = readable_note(str(note))
            if text not in notes:
                notes.append(text)
    units = {s.name: s.tags.get("unit", "") for s in data.system.values()}
    last_system = data.status.get("last_system") or {}
    readings = [(key, value, *split_reading_key(key)) for key, value in last_system.items()]
    tiles = []
    for order, (metric, want, label) in enumerate(_TILES):
        for key, value, name, hw_id, attrs in readings:
            if name != metric or any(attrs.get(k) != v for k, v in want.items()):
                continue
            if metric == "hw.errors" and not value:
                continue  # a tile only once the GPU reports uncorrectable errors
            device = (len(hw_id or ""), hw_id or "")  # host first, then gpu0, gpu1, ..., gpu10
            tile = {
                "name": key,
                "label": f"{hw_id} {label}" if hw_id else label,
                "value": value,
                "unit": units.get(name, ""),
            }
            tiles.append((device, order, tile))
    latest = [tile for _device, _order, tile in sorted(tiles, key=lambda t: (t[0], t[1]))]
    return {"notes": notes, "latest": latest, "units": units}
