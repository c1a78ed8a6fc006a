"""RunData -> the card payload (``docs/card-payload.md``). Pure: no Metaflow, no I/O.

Series are downsampled for display with min/max per bucket, so spikes and extremes stay visible
at any run length; live payloads carry only each series' tail and stay small.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..store.reader import RunData, Series
from ..telemetry._samples import split_reading_key
from .gang import gang_section

SCHEMA_VERSION = 1
MAX_POINTS = 2000  # per series in a full render (min and max of 1000 buckets)
LIVE_TAIL = 150  # points per series in a live update, at most (the page keeps what it drew)
LIVE_WINDOW_S = 30.0  # a live update covers at least this much recent history
LIVE_SCAN_MAX = 20_000  # ...but never scans more points than this per series
HEAD_POINTS = 100  # coarse whole-series picture in live updates, to back-fill a page opened mid-run
HEAD_REFRESH_S = 20.0
LIVE_MAX_BYTES = 60_000  # live payloads must stay small: Metaflow stores and serves each one whole
LOG_TAIL = 300
LIVE_LOG_TAIL = 80

# Logged once at the end by the HF Trainer, or shown in the status panel: not worth a chart.
_NOT_CHARTED = {
    "epoch",
    "total_flos",
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "train_loss",
    "train_tokens_per_second",
}

_SYSTEM_CHARTS: list[tuple[str, str, str, tuple[str, ...]]] = [
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
        ("hw.gpu.memory.usage", "hw.gpu.memory.limit", "traincard.gpu.torch.memory"),
    ),
    ("gpu_temp", "GPU temperature", "°C", ("hw.temperature",)),
    ("gpu_power", "GPU power", "W", ("hw.power",)),
]
_RATE_METRICS = {"system.disk.io", "system.network.io"}
_SCALE = {"%": 100.0, "GB": 1e-9, "MB/s": 1e-6}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def downsample(xs: Sequence[float], ys: Sequence[float], max_points: int = MAX_POINTS) -> tuple[list, list]:
    """Keep the min and the max of each bucket, in x order (spikes survive any zoom level)."""
    n = len(xs)
    if n <= max_points:
        return list(xs), [_finite(y) for y in ys]
    try:
        import numpy as np
    except ImportError:  # numpy comes with pyarrow/torch; the pure-Python path is only slower
        return _downsample_py(xs, ys, max_points)
    buckets = max_points // 2
    size = -(-n // buckets)
    y = np.full(buckets * size, np.nan)
    y[:n] = np.asarray(ys, dtype=float)
    y[~np.isfinite(y)] = np.nan
    grid = y.reshape(buckets, size)
    empty = np.isnan(grid).all(axis=1)
    filled = np.where(np.isnan(grid), np.inf, grid)
    lo = filled.argmin(axis=1)
    hi = np.where(np.isnan(grid), -np.inf, grid).argmax(axis=1)
    rows = np.arange(buckets) * size
    keep = np.unique(np.concatenate([(rows + lo)[~empty], (rows + hi)[~empty], rows[empty]]))
    keep = keep[keep < n]
    x_arr = np.asarray(xs)
    out_y = y[keep]
    return x_arr[keep].tolist(), [None if np.isnan(v) else float(v) for v in out_y]


def _downsample_py(xs: Sequence[float], ys: Sequence[float], max_points: int) -> tuple[list, list]:
    n = len(xs)
    buckets = max_points // 2
    size = n / buckets
    out_x: list[float] = []
    out_y: list[float | None] = []
    for b in range(buckets):
        lo, hi = int(b * size), min(int((b + 1) * size), n)
        idx = [i for i in range(lo, hi) if math.isfinite(ys[i])]
        if not idx:
            if lo < hi:
                out_x.append(xs[lo])
                out_y.append(None)
            continue
        for i in sorted({min(idx, key=ys.__getitem__), max(idx, key=ys.__getitem__)}):
            out_x.append(xs[i])
            out_y.append(ys[i])
    return out_x, out_y


@dataclasses.dataclass(frozen=True)
class _Mode:
    live: bool
    tail: int = LIVE_TAIL
    log_tail: int = LIVE_LOG_TAIL
    heads: bool = True


def _xy(series: Series, mode: _Mode, by: str = "step") -> tuple[list, list]:
    xs_all = series.steps if by == "step" else series.times
    if mode.live:
        return _live_tail(series, xs_all, mode)
    if None not in xs_all:  # the common case, checked at C speed
        return downsample(xs_all, series.values)  # type: ignore[arg-type]
    pairs = [(x, v) for x, v in zip(xs_all, series.values, strict=False) if x is not None]
    return downsample([p[0] for p in pairs], [p[1] for p in pairs])


def _live_tail(series: Series, xs_all: Sequence[Any], mode: _Mode) -> tuple[list, list]:
    """The points of the last ``LIVE_WINDOW_S`` seconds (at least ``mode.tail`` points), downsampled
    to ``mode.tail``: a viewer polling less often than we refresh still gets every stretch."""
    times = series.times
    newest = times[-1] if times else 0.0
    xs: list = []
    ys: list = []
    i = len(xs_all) - 1
    while i >= 0 and len(xs) < LIVE_SCAN_MAX and (len(xs) < mode.tail or times[i] >= newest - LIVE_WINDOW_S):
        if xs_all[i] is not None:
            xs.append(xs_all[i])
            ys.append(series.values[i])
        i -= 1
    xs.reverse()
    ys.reverse()
    return downsample(xs, ys, max_points=max(mode.tail, 4))


def _head(series: Series, by: str) -> tuple[list, list]:
    """A coarse picture of the whole series, recomputed at most every ``HEAD_REFRESH_S``."""
    key = (id(series), by)
    cached = _head_cache.get(key)
    now = time.monotonic()
    if cached and cached[0] is series and now - cached[1] < HEAD_REFRESH_S:
        return cached[2]
    xs_all = series.steps if by == "step" else series.times
    pairs = [(x, v) for x, v in zip(xs_all, series.values, strict=False) if x is not None]
    head = downsample([p[0] for p in pairs], [p[1] for p in pairs], max_points=HEAD_POINTS)
    if len(_head_cache) > 10_000:
        _head_cache.clear()
    _head_cache[key] = (series, now, head)
    return head


_head_cache: dict[tuple[int, str], tuple[Series, float, tuple[list, list]]] = {}


def _chart_name(metric: str) -> tuple[str, str]:
    """(chart, series label): ``eval_loss`` joins ``loss`` as its eval series."""
    if metric.startswith("eval_"):
        return metric[5:], "eval"
    if metric.startswith("train_") and metric not in _NOT_CHARTED:
        return metric[6:], "train"
    return metric, "train"


def training_charts(data: RunData, mode: _Mode) -> list[dict[str, Any]]:
    charts: dict[str, dict[str, Any]] = {}
    for _key, series in sorted(data.metrics.items()):
        if series.name in _NOT_CHARTED:
            continue
        chart_id, label = _chart_name(series.name)
        if series.tags:
            label = ",".join(f"{k}={v}" for k, v in sorted(series.tags.items()))
        ranks = sorted(set(series.ranks))
        chart = charts.setdefault(
            chart_id,
            {"id": chart_id, "title": chart_id, "group": "training", "unit": "", "x": "step", "series": []},
        )
        for rank in ranks:
            per_rank = (
                series
                if len(ranks) == 1
                else _subset(series, [i for i, r in enumerate(series.ranks) if r == rank])
            )
            rank_label = f"{label} rank {rank}" if len(ranks) > 1 else label
            stretches = _stretches(per_rank, tail=LIVE_SCAN_MAX if mode.live else None)
            for n, stretch in stretches:
                xs, ys = _xy(stretch, mode)
                if xs or not mode.live:
                    entry: dict[str, Any] = {
                        "label": rank_label if n == 0 else f"{rank_label} (resumed {n})",
                        "x": xs,
                        "y": ys,
                    }
                    if (
                        mode.live
                        and mode.heads
                        and len(stretches) == 1
                        and n == 0
                        and len(per_rank) > len(xs)
                    ):
                        entry["head_x"], entry["head_y"] = _head(per_rank, "step")
                    chart["series"].append(entry)
    for chart in charts.values():  # train first, then eval, then the rest: stable colours
        chart["series"].sort(key=lambda s: (0 if s["label"].startswith("train") else 1, s["label"]))
    ordered = sorted(charts.values(), key=lambda c: (_CHART_ORDER.get(c["id"], 50), c["id"]))
    head = [c for c in ordered if _CHART_ORDER.get(c["id"], 50) < 90]
    tail = [c for c in ordered if _CHART_ORDER.get(c["id"], 50) >= 90]
    return head + _throughput_charts(data, mode) + tail


# Known curves first; the Trainer's eval timing figures last (after throughput).
_CHART_ORDER = {
    "loss": 0,
    "learning_rate": 1,
    "lr": 1,
    "grad_norm": 2,
    "runtime": 90,
    "samples_per_second": 91,
    "steps_per_second": 92,
}


_cuts_cache: dict[int, tuple[Series, int, list[int]]] = {}


def _cuts(series: Series) -> list[int]:
    """Indices where the step moves backwards, scanned incrementally (series only grow)."""
    cached = _cuts_cache.get(id(series))
    start, cuts = (cached[1], list(cached[2])) if cached and cached[0] is series else (0, [])
    steps = series.steps
    last = next((steps[i] for i in range(start - 1, -1, -1) if steps[i] is not None), None)
    for i in range(start, len(steps)):
        step = steps[i]
        if step is None:
            continue
        if last is not None and step < last:
            cuts.append(i)
        last = step
    if len(_cuts_cache) > 10_000:
        _cuts_cache.clear()
    _cuts_cache[id(series)] = (series, len(steps), cuts)
    return cuts


def _stretches(series: Series, tail: int | None = None) -> list[tuple[int, Series]]:
    """Split where the step moves backwards (resume, retry): every stretch stays visible.

    With ``tail``, only the stretches (and points) among the last ``tail`` points are returned.
    """
    cuts = _cuts(series)
    if not cuts and tail is None:
        return [(0, series)]
    n_points = len(series.steps)
    bounds = [0, *cuts, n_points]
    out = []
    for n, (a, b) in enumerate(itertools.pairwise(bounds)):
        if tail is not None:
            if b <= n_points - tail:
                continue
            a = max(a, n_points - tail)
        out.append((n, _subset(series, range(a, b))))
    return out


def _subset(series: Series, idx: Iterable[int]) -> Series:
    idx = list(idx)
    return Series(
        name=series.name,
        tags=series.tags,
        steps=[series.steps[i] for i in idx],
        values=[series.values[i] for i in idx],
        times=[series.times[i] for i in idx],
        attempts=[series.attempts[i] for i in idx],
        ranks=[series.ranks[i] for i in idx],
    )


def _throughput_charts(data: RunData, mode: _Mode) -> list[dict[str, Any]]:
    out = []
    for name, title in (("tokens_per_second", "tokens/s"), ("samples_per_second", "samples/s")):
        series = [s for s in data.throughput.values() if s.name == name]
        if series:
            out.append(
                {
                    "id": f"throughput_{name}",
                    "title": title,
                    "group": "training",
                    "unit": "",
                    "x": "step",
                    "series": [
                        {"label": f"rank {s.tags.get('rank', '0')}", "x": xy[0], "y": xy[1]}
                        for s in series
                        for xy in [_xy(s, mode)]
                    ],
                }
            )
    if data.step_times:
        out.append(
            {
                "id": "step_time",
                "title": "step time per rank",
                "group": "training",
                "unit": "s",
                "x": "step",
                "series": [
                    {"label": f"rank {rank}", "x": xy[0], "y": xy[1]}
                    for rank, s in sorted(data.step_times.items())
                    for xy in [_xy(s, mode)]
                ],
            }
        )
    return out


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


def _system_label(series: Series, node: str | None) -> str:
    tags = {
        k: v
        for k, v in series.tags.items()
        if k not in {"unit", "hw.name", "hw.vendor", "hw.type", "hw.gpu.task"}
    }
    parts = [series.name.split(".")[0] if series.name.startswith(("process.", "system.")) else ""]
    parts += [v for k, v in sorted(tags.items())]
    if series.name == "traincard.gpu.torch.memory":  # the allocator's view beside the driver's
        parts.insert(-1, "torch")  # "gpu0 torch peak"
    if series.name.endswith(".limit"):
        parts.append("limit")
    if node:
        parts.insert(0, node)
    return " ".join(p for p in parts if p) or series.name


def _node_names(data: RunData) -> dict[int, str]:
    """Sampling rank -> node label (host name, else the rank)."""
    names = {}
    for st in data.states:
        rank = int(st.get("rank", 0))
        names[rank] = str(st.get("host") or f"rank {rank}")
    return names


_AVERAGED = {"system.cpu.utilization", "process.cpu.utilization", "hw.gpu.utilization"}


def _total(per_node: list[tuple[str, list, list]], name: str) -> dict[str, Any]:
    """Sum (or mean, for utilizations) across nodes, aligned on whole seconds."""
    buckets: dict[int, list[float]] = {}
    for _label, xs, ys in per_node:
        for x, y in zip(xs, ys, strict=False):
            if y is not None:
                buckets.setdefault(round(x), []).append(y)
    keys = sorted(k for k, v in buckets.items() if len(v) == len(per_node))
    agg = (lambda v: sum(v) / len(v)) if name in _AVERAGED else sum
    return {
        "label": "all nodes" + (" (mean)" if name in _AVERAGED else " (total)"),
        "x": keys,
        "y": [agg(buckets[k]) for k in keys],
    }


def system_charts(data: RunData, mode: _Mode) -> list[dict[str, Any]]:
    nodes = _node_names(data)
    multi_node = len({r for s in data.system.values() for r in s.ranks}) > 1
    out = []
    scale_for = {cid: _SCALE.get(unit, 1.0) for cid, _t, unit, _n in _SYSTEM_CHARTS}
    for chart_id, title, unit, names in _SYSTEM_CHARTS:
        series_out: list[dict[str, Any]] = []
        by_metric: dict[tuple[str, str], list[tuple[str, list, list]]] = {}
        for _key, series in sorted(data.system.items()):
            if series.name not in names:
                continue
            if series.name == "system.memory.usage" and series.tags.get("system.memory.state") not in (
                None,
                "used",
            ):
                continue
            for rank in sorted(set(series.ranks)) if multi_node else [None]:
                part = (
                    series
                    if rank is None
                    else _subset(series, [i for i, r in enumerate(series.ranks) if r == rank])
                )
                if mode.live:  # rates need one point before the tail
                    part = _subset(part, range(max(0, len(part) - mode.tail - 1), len(part)))
                s = _rate(part) if part.name in _RATE_METRICS else part
                xs, ys = _xy(s, mode, by="time")
                ys = [None if y is None else y * scale_for[chart_id] for y in ys]
                label = _system_label(series, nodes.get(rank, f"rank {rank}") if rank is not None else None)
                series_out.append({"label": label, "x": xs, "y": ys})
                if rank is not None and series.name.startswith(("system.", "hw.gpu.utilization")):
                    base = _system_label(series, None)
                    by_metric.setdefault((series.name, base), []).append((label, xs, ys))
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


def _markers(data: RunData) -> list[dict[str, Any]]:
    out = []
    for ev in data.events:
        if ev["name"] == "traincard.run.started" and ev["attempt"] > 0 and ev["rank"] == 0:
            step = _first_step(data, ev["attempt"])
            if step is not None:
                out.append({"x": step, "label": f"attempt {ev['attempt']} (retry)", "kind": "restart"})
        elif ev["name"] in ("traincard.run.resumed", "traincard.run.rewind"):
            step = ev["attributes"].get("traincard.step")
            if step is not None:
                out.append({"x": step, "label": f"resumed at step {step}", "kind": "rewind"})
    return out


def _first_step(data: RunData, attempt: int) -> int | None:
    steps = [
        s
        for series in data.metrics.values()
        for s, a in zip(series.steps, series.attempts, strict=False)
        if a == attempt and s is not None
    ]
    return min(steps) if steps else None


def _eta(data: RunData, step: int | None, max_steps: int | None) -> float | None:
    if step is None or not max_steps or step >= max_steps:
        return None
    series = data.step_times.get(0)
    if series is None or len(series) < 2:
        return None
    recent = [
        d
        for d, a in zip(series.values[-50:], series.attempts[-50:], strict=False)
        if a == series.attempts[-1]
    ]
    if not recent:
        return None
    per_step = sorted(recent)[len(recent) // 2]
    return per_step * (max_steps - step)


def run_status(data: RunData, now: float) -> dict[str, Any]:
    st = data.status
    progress = st.get("progress") or {}
    started = min((s.get("started_at") or now for s in data.states), default=now)
    updated = max((s.get("updated_at") or 0 for s in data.states), default=now)
    running = st.get("status") == "running"
    step = st.get("step", progress.get("step"))
    max_steps = progress.get("max_steps")
    elapsed = (now if running else updated) - started
    eta = _eta(data, step, max_steps) if running else None
    hourly = st.get("hourly_cost")
    cost = None
    if hourly:
        so_far = hourly * elapsed / 3600
        cost = {"hourly": hourly, "so_far": so_far, "at_eta": so_far + hourly * (eta or 0) / 3600}
    return {
        "title": data.source,
        "status": st.get("status", "unknown"),
        "phase": st.get("phase") or "",
        "step": step,
        "max_steps": max_steps,
        "epoch": progress.get("epoch"),
        "num_epochs": progress.get("num_epochs"),
        "started_at": started,
        "updated_at": updated,
        "elapsed_s": elapsed,
        "eta_s": eta,
        "batch_size": progress.get("batch_size"),
        "world_size": progress.get("world_size") or st.get("world_size"),
        "attempt": st.get("attempt", 0),
        "restarts": st.get("restarts", 0),
        "heartbeat_age_s": (now - st["heartbeat_at"]) if running and st.get("heartbeat_at") else None,
        "cost": cost,
    }


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def _clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "never"


def lost_ranks(data: RunData, now: float | None = None) -> list[dict[str, Any]]:
    """Ranks of the latest attempt still marked running whose heartbeat is older than the timeout.

    Computed from the states at render time too, so a lost rank is named even when rank 0 (which
    also watches) is the one that died. A rank that finished normally is never lost.
    """
    now = time.time() if now is None else now
    st = data.status
    found = {int(r["rank"]): r for r in st.get("lost_ranks") or []}
    ranks = st.get("ranks") or {}
    if len(ranks) > 1:
        timeout = float(st.get("rank_timeout_s") or 120.0)
        for rank, s in ranks.items():
            beat = s.get("heartbeat_at") or 0
            if s.get("status") == "running" and now - beat > timeout and int(rank) not in found:
                found[int(rank)] = {
                    "rank": int(rank),
                    "host": s.get("host"),
                    "heartbeat_at": beat,
                    "step": s.get("step"),
                }
    return [found[r] for r in sorted(found)]


def _resumed_text(data: RunData, status: dict[str, Any]) -> str:
    text = f"Attempt {status['attempt']}: restarted {status['restarts']} time(s); earlier attempts are kept"
    prev = data.status.get("previous_attempt") or {}
    end = prev.get("previous_end")
    if end == "exception":
        text += f". Attempt {prev.get('previous_attempt')} ended with {prev.get('exception_type')}"
    elif end == "signal":
        text += f". Attempt {prev.get('previous_attempt')} was terminated by {prev.get('signal')}"
    elif end == "vanished":
        text += f". Attempt {prev.get('previous_attempt')} vanished (killed, e.g. SIGKILL / exit 137)"
        if prev.get("verdict") == "host_oom":
            text += f" — likely host out of memory: {prev.get('evidence')}"
    if end and prev.get("previous_step") is not None:
        text += f" at step {prev['previous_step']}"
    return text


def _banners(data: RunData, status: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    st = data.status
    failure = st.get("failure")
    if failure:
        verdict = (failure.get("verdict") or {}).get("text")
        text = f"Training failed: {failure.get('type')}: {failure.get('message', '')[:300]}"
        out.append({"kind": "failed", "text": text + (f" — {verdict}" if verdict else "")})
    if st.get("status") == "terminated":
        out.append(
            {
                "kind": "terminated",
                "text": f"Terminated by {st.get('terminated_by') or 'a signal'} at step {status.get('step')}",
            }
        )
    if st.get("stalled"):
        since = st.get("stalled_since")
        ago = f" for {_duration(time.time() - since)}" if since else ""
        out.append(
            {"kind": "stalled", "text": f"Stalled{ago}: no step progress since step {status.get('step')}"}
        )
    lost = lost_ranks(data)
    if lost:
        names = "; ".join(
            f"rank {r['rank']} on {r.get('host') or '?'} (last heartbeat {_clock(r.get('heartbeat_at'))}, "
            f"step {r.get('step')})"
            for r in lost
        )
        out.append(
            {"kind": "degraded", "text": f"Degraded: {len(lost)} rank(s) stopped heart-beating: {names}"}
        )
    if status["restarts"]:
        out.append({"kind": "resumed", "text": _resumed_text(data, status)})
    share = st.get("input_bound_share")
    if share:
        out.append(
            {"kind": "info", "text": f"Input-bound: {share:.0%} of step time is spent waiting for data"}
        )
    dropped = sum(data.stats.get("dropped", {}).values())
    if dropped:
        out.append(
            {"kind": "dropped", "text": f"{dropped} telemetry records were dropped: {data.stats['dropped']}"}
        )
    if data.stats.get("corrupt_segments"):
        out.append(
            {"kind": "info", "text": f"{data.stats['corrupt_segments']} unreadable store segment(s) skipped"}
        )
    for note in dict.fromkeys(s["compaction_note"] for s in data.states if s.get("compaction_note")):
        text = f"{note[:1].upper()}{note[1:]}; the store keeps its segments instead, nothing is lost"
        out.append({"kind": "info", "text": text})
    return out


def _checkpoints(data: RunData) -> list[dict[str, Any]]:
    """Each save says whether it was the best *so far*; the card marks only the latest such one."""
    out = [dict(c) for c in data.checkpoints]
    best = [i for i, c in enumerate(out) if c.get("best")]
    for i, c in enumerate(out):
        c["best"] = bool(best) and i == best[-1]
    return out


def _logs(data: RunData, mode: _Mode) -> list[dict[str, Any]]:
    n = mode.log_tail if mode.live else LOG_TAIL
    logs = sorted(data.logs[-4 * n :], key=lambda r: r["time"])[-n:]
    return [
        {
            "time": r["time"],
            "level": r["level"],
            "rank": r["rank"],
            "message": r["message"],
            "traceback": r.get("traceback"),
        }
        for r in logs
    ]


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
    ("traincard.gpu.torch.memory", {"traincard.torch.memory.kind": "peak"}, "torch peak"),
    ("hw.temperature", {}, "temperature"),
    ("hw.power", {}, "power"),
    ("hw.errors", {"error.type": "uncorrected"}, "uncorrected ECC errors"),
]


def _system_section(data: RunData) -> dict[str, Any]:
    notes: list[str] = []
    for s in data.states:
        for note in s.get("notes") or []:
            if note not in notes:
                notes.append(note)
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


def build_payload(
    data: RunData,
    *,
    live: bool = False,
    final: bool = False,
    now: float | None = None,
    hourly_cost: float | None = None,
) -> dict[str, Any]:
    """The card payload for ``data``; ``live`` makes a small tail-only update (< ``LIVE_MAX_BYTES``)."""
    if not live:
        return _build(data, _Mode(live=False), final=final, now=now, hourly_cost=hourly_cost)
    for tail, log_tail, heads in (
        (LIVE_TAIL, LIVE_LOG_TAIL, True),
        (20, 40, True),
        (20, 40, False),
        (6, 20, False),
        (2, 10, False),
    ):
        mode = _Mode(True, tail, log_tail, heads)
        payload = _build(data, mode, final=final, now=now, hourly_cost=hourly_cost)
        if len(json.dumps(payload)) <= LIVE_MAX_BYTES:
            break
    return payload


def _build(
    data: RunData, mode: _Mode, *, final: bool, now: float | None, hourly_cost: float | None
) -> dict[str, Any]:
    live = mode.live
    now = time.time() if now is None else now
    status = run_status(data, now)
    if hourly_cost and status["cost"] is None:
        so_far = hourly_cost * status["elapsed_s"] / 3600
        status["cost"] = {
            "hourly": hourly_cost,
            "so_far": so_far,
            "at_eta": so_far + hourly_cost * (status["eta_s"] or 0) / 3600,
        }
    failure = data.status.get("failure")
    return {
        "v": SCHEMA_VERSION,
        "final": final,
        "live": live,
        "generated_at": now,
        "run": status,
        "banners": _banners(data, status),
        "charts": training_charts(data, mode) + system_charts(data, mode),
        "markers": _markers(data),
        "checkpoints": _checkpoints(data)[-(20 if live else 500) :],
        "logs": _logs(data, mode),
        "failure": failure,
        "system": _system_section(data),
        "gang": gang_section(data, now),
        "stats": {
            "dropped": data.stats.get("dropped", {}),
            "corrupt_segments": data.stats.get("corrupt_segments", 0),
            "segments": data.stats.get("segments", 0),
            "points": data.stats.get("records", 0),
        },
    }
