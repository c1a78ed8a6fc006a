"""The Python side of the card contract (docs/card-payload.md): pure functions over RunData."""

from __future__ import annotations

import json
import math

from traincard_otel._read.load.reader import RunData, Series
from traincard_otel._read.payload import LIVE_MAX_BYTES, build_payload, downsample


def _series(name: str, n: int, f: object) -> Series:
    steps = list(range(1, n + 1))
    return Series(
        name=name,
        steps=steps,
        values=[f(s) for s in steps],
        times=[1000.0 + s for s in steps],  # type: ignore[operator]
        attempts=[0] * n,
        ranks=[0] * n,
    )


def _big_run(n: int) -> RunData:
    data = RunData(source="big")
    for i, name in enumerate(["loss", "eval_loss", "learning_rate", "grad_norm", "acc", "ppl", "m6", "m7"]):
        data.metrics[name] = _series(name, n, lambda s, i=i: math.sin(s / 100 + i))
    data.logs = [{"time": float(i), "level": "INFO", "message": "x" * 200, "rank": 0} for i in range(5000)]
    data.states = [
        {
            "attempt": 0,
            "rank": 0,
            "status": "running",
            "step": n,
            "progress": {"max_steps": 2 * n},
            "started_at": 0.0,
            "updated_at": 10.0,
            "heartbeat_at": 10.0,
        }
    ]
    return data


def test_downsampling_keeps_spikes_and_extremes() -> None:
    n = 100_000
    xs = list(range(n))
    ys = [0.0] * n
    ys[31_337] = 50.0
    ys[77_777] = -20.0
    dx, dy = downsample(xs, ys, max_points=1000)
    assert len(dx) <= 1000
    assert 50.0 in dy and -20.0 in dy
    assert dx == sorted(dx)


def test_live_payload_stays_small_at_any_run_length() -> None:
    for n in (1_000, 200_000):
        payload = build_payload(_big_run(n), live=True)
        assert len(json.dumps(payload)) <= LIVE_MAX_BYTES < 64 * 1024
        loss = next(c for c in payload["charts"] if c["id"] == "loss")
        train = next(s for s in loss["series"] if s["label"] == "train")
        assert train["x"][-1] == n  # the tail, ending at the newest point


def test_full_payload_is_downsampled_and_json_safe() -> None:
    data = _big_run(50_000)
    data.metrics["loss"].values[100] = float("nan")
    payload = build_payload(data, final=True)
    text = json.dumps(payload, allow_nan=False)  # NaN became null
    assert len(text) < 5 * 2**20
    loss = next(c for c in payload["charts"] if c["id"] == "loss")
    assert {s["label"] for s in loss["series"]} == {"train", "eval"}
    assert len(loss["series"][0]["x"]) <= 2000
    assert payload["run"]["status"] == "running" and payload["run"]["max_steps"] == 100_000


def test_numpy_and_pure_python_downsampling_agree() -> None:
    from traincard_otel._read.payload.series import downsample_py

    xs = list(range(10_007))
    ys = [math.sin(i / 37) * (5 if i % 997 == 0 else 1) for i in xs]
    ys[500] = float("nan")
    fast = downsample(xs, ys, max_points=400)
    slow = downsample_py(xs, ys, 400)
    assert max(v for v in fast[1] if v is not None) == max(v for v in slow[1] if v is not None)
    assert min(v for v in fast[1] if v is not None) == min(v for v in slow[1] if v is not None)
    assert len(fast[0]) <= 400 and fast[0] == sorted(fast[0])


def test_system_charts_per_node_and_total() -> None:
    from traincard_otel._read.payload import Mode, system_charts

    data = RunData(source="two nodes")
    data.states = [{"attempt": 0, "rank": 0, "host": "node-a"}, {"attempt": 0, "rank": 4, "host": "node-b"}]
    cpu = Series(name="system.cpu.utilization", tags={"unit": "1"})
    for t in range(10):
        for rank, value in ((0, 0.2), (4, 0.6)):
            cpu.steps.append(None)
            cpu.values.append(value)
            cpu.times.append(1000.0 + t + rank / 100)
            cpu.attempts.append(0)
            cpu.ranks.append(rank)
    data.system["system.cpu.utilization"] = cpu
    chart = next(c for c in system_charts(data, Mode(live=False)) if c["id"] == "cpu")
    labels = [s["label"] for s in chart["series"]]
    assert labels == ["node-a system", "node-b system", "system all nodes (mean)"]
    mean = chart["series"][2]["y"]
    assert mean and all(abs(v - 40.0) < 1e-9 for v in mean)  # percent


def test_gpu_memory_chart_shows_the_driver_and_the_torch_allocator_views() -> None:
    from traincard_otel._read.payload import Mode, system_charts

    data = RunData(source="one gpu")
    gib, torch_kind = 2**30, "traincard.torch.memory.kind"
    figures = [
        ("hw.gpu.memory.usage", {"hw.id": "gpu0", "hw.name": "H100"}, 30 * gib),
        ("hw.gpu.memory.limit", {"hw.id": "gpu0", "hw.name": "H100"}, 80 * gib),
        ("traincard.gpu.torch.memory", {"hw.id": "gpu0", torch_kind: "reserved"}, 28 * gib),
        ("traincard.gpu.torch.memory", {"hw.id": "gpu0", torch_kind: "peak"}, 25 * gib),
    ]
    for name, tags, value in figures:
        series = Series(name=name, tags={**tags, "unit": "By"})
        for t in range(3):
            series.steps.append(None)
            series.values.append(value)
            series.times.append(1000.0 + t)
            series.attempts.append(0)
            series.ranks.append(0)
        data.system[f"{name}{tags}"] = series
    chart = next(c for c in system_charts(data, Mode(live=False)) if c["id"] == "gpu_mem")
    got = {s["label"]: round(s["y"][-1], 6) for s in chart["series"]}
    assert got == {"gpu0": 30.0, "gpu0 limit": 80.0, "gpu0 torch reserved": 28.0, "gpu0 torch peak": 25.0}
    assert chart["unit"] == "GiB"  # as the tiles give bytes


def test_latest_reading_tiles_name_the_device_and_carry_the_recorded_units() -> None:
    from traincard_otel._schema.keys import split_reading_key
    from traincard_otel._write.telemetry import Sample
    from traincard_otel._write.telemetry.gpu import GpuSampler

    from tests.support.fakes.nvml import FakeNvml

    gpu = GpuSampler(FakeNvml(devices=2))
    gpu.start()
    samples = [
        Sample("system.cpu.utilization", 0.25, "1", "gauge"),
        Sample("system.memory.usage", 8 * 2**30, "By", "updowncounter", {"system.memory.state": "used"}),
        Sample("system.memory.usage", 2 * 2**30, "By", "updowncounter", {"system.memory.state": "free"}),
        *gpu.sample(),
    ]
    data = RunData(source="fake gpus")
    data.states = [{"attempt": 0, "rank": 0, "last_system": {s.reading_key: s.value for s in samples}}]
    for s in samples:
        series = data.system.setdefault(s.reading_key, Series(name=s.name, tags={"unit": s.unit}))
        series.values.append(s.value)
    assert all(split_reading_key(s.reading_key)[0] == s.name for s in samples)

    section = build_payload(data, final=True)["system"]
    tiles = [(t["label"], t["value"], t["unit"]) for t in section["latest"]]
    assert tiles[:2] == [("CPU", 0.25, "1"), ("Memory used", 8 * 2**30, "By")]
    assert [label for label, _v, _u in tiles[2:]] == [
        f"gpu{i} {what}"
        for i in (0, 1)
        for what in ("utilization", "memory used", "memory total", "temperature", "power")
    ]
    assert ("gpu1 temperature", 61.0, "Cel") in tiles and ("gpu0 power", 300.0, "W") in tiles
    assert section["units"]["hw.energy"] == "J"  # the failure table looks units up here
