"""The system section: host and GPU charts by time (per node, with a total across nodes), the
latest-readings tiles, and the sampler's notes in words a user can act on."""

from __future__ import annotations

import re

from ..._data.rundata import RunData, Series
from ..._schema import Attr, SystemMetric
from ..._schema.keys import DEVICE_ATTRIBUTES, split_reading_key
from .contract import ChartRow, ChartSeriesRow, SystemSection, TileRow
from .series import Mode, subset, xy

M = SystemMetric
TORCH_MEMORY = M.TORCH_MEMORY.name

SYSTEM_CHARTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    # (chart id, title, unit, metric names)
    ("cpu", "CPU utilization", "%", (M.CPU_UTILIZATION.name, M.PROCESS_CPU_UTILIZATION.name)),
    ("memory", "Memory used", "GiB", (M.MEMORY_USAGE.name, M.PROCESS_MEMORY_USAGE.name, M.MEMORY_LIMIT.name)),
    ("disk", "Disk throughput", "MB/s", (M.DISK_IO.name,)),
    ("network", "Network throughput", "MB/s", (M.NETWORK_IO.name,)),
    ("gpu_util", "GPU utilization", "%", (M.GPU_UTILIZATION.name,)),
    ("gpu_mem", "GPU memory used", "GiB", (M.GPU_MEMORY_USAGE.name, M.GPU_MEMORY_LIMIT.name, TORCH_MEMORY)),
    ("gpu_temp", "GPU temperature", "°C", (M.TEMPERATURE.name,)),
    ("gpu_power", "GPU power", "W", (M.POWER.name,)),
]
RATIO_METRICS = (M.CPU_UTILIZATION.name, M.PROCESS_CPU_UTILIZATION.name, M.GPU_UTILIZATION.name)
_RATE_METRICS = {M.DISK_IO.name, M.NETWORK_IO.name}
# Memory in GiB, as the latest-readings tiles, nvidia-smi (MiB) and torch.cuda give it
_SCALE = {"%": 100.0, "GiB": 1 / 2**30, "MB/s": 1e-6}
_AVERAGED = set(RATIO_METRICS)
# Summed or averaged across nodes: the host figures and GPU utilization.
_TOTALLED = {
    m.name
    for m in (M.CPU_UTILIZATION, M.MEMORY_USAGE, M.MEMORY_LIMIT, M.DISK_IO, M.NETWORK_IO, M.GPU_UTILIZATION)
}
_LABEL_SKIP = {"unit", *(DEVICE_ATTRIBUTES - {Attr.HW_ID})}

# The latest-readings tiles: (metric, attributes it must carry, label); GPU labels get "gpu0 " first.
_TILES: list[tuple[str, dict[str, str], str]] = [
    (M.CPU_UTILIZATION.name, {}, "CPU"),
    (M.PROCESS_CPU_UTILIZATION.name, {}, "CPU, this process"),
    (M.MEMORY_USAGE.name, {Attr.MEMORY_STATE: "used"}, "Memory used"),
    (M.MEMORY_LIMIT.name, {}, "Memory total"),
    (M.PROCESS_MEMORY_USAGE.name, {}, "Memory, this process"),
    (M.GPU_UTILIZATION.name, {}, "utilization"),
    (M.GPU_MEMORY_USAGE.name, {}, "memory used"),
    (M.GPU_MEMORY_LIMIT.name, {}, "memory total"),
    (TORCH_MEMORY, {Attr.TORCH_MEMORY_KIND: "peak"}, "torch peak"),
    (M.TEMPERATURE.name, {}, "temperature"),
    (M.POWER.name, {}, "power"),
    (M.ERRORS.name, {Attr.ERROR_TYPE: "uncorrected"}, "uncorrected ECC errors"),
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


def _total(per_node: list[tuple[str, list[float], list[float | None]]], name: str) -> ChartSeriesRow:
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


def system_charts(data: RunData, mode: Mode) -> list[ChartRow]:
    """One chart per entry of ``SYSTEM_CHARTS`` that has data; per node when several nodes sample."""
    nodes = _node_names(data)
    multi_node = len({r for s in data.system.values() for r in s.ranks}) > 1
    out: list[ChartRow] = []
    for chart_id, title, unit, names in SYSTEM_CHARTS:
        scale = _SCALE.get(unit, 1.0)
        series_out: list[ChartSeriesRow] = []
        by_metric: dict[tuple[str, str], list[tuple[str, list[float], list[float | None]]]] = {}
        for _key, series in sorted(data.system.items()):
            if series.name not in names:
                continue
            if series.name == M.MEMORY_USAGE.name and series.tags.get(Attr.MEMORY_STATE) not in (
                None,
                "used",
            ):
                continue
            for rank in sorted(set(series.ranks)) if multi_node else [None]:
                # the reader keeps system series in time order; a rank's subset stays so
                part = (
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
                if rank is not None and series.name in _TOTALLED:
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


def system_section(data: RunData) -> SystemSection:
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
            if metric == M.ERRORS.name and not value:
                continue  # a tile only once the GPU reports uncorrectable errors
            device = (len(hw_id or ""), hw_id or "")  # host first, then gpu0, gpu1, ..., gpu10
            tile: TileRow = {
                "name": key,
                "label": f"{hw_id} {label}" if hw_id else label,
                "value": value,
                "unit": units.get(name, ""),
            }
            tiles.append((device, order, tile))
    latest = [tile for _device, _order, tile in sorted(tiles, key=lambda t: (t[0], t[1]))]
    return {"notes": notes, "latest": latest, "units": units}
