"""The Python side of the card contract (docs/card-payload.md): pure functions over RunData."""

from __future__ import annotations

import json
import math

from traincard_otel.card.payload import LIVE_MAX_BYTES, build_payload, downsample
from traincard_otel.store.reader import RunData, Series


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
    from traincard_otel.card.payload import _downsample_py

    xs = list(range(10_007))
    ys = [math.sin(i / 37) * (5 if i % 997 == 0 else 1) for i in xs]
    ys[500] = float("nan")
    fast = downsample(xs, ys, max_points=400)
    slow = _downsample_py(xs, ys, 400)
    assert max(v for v in fast[1] if v is not None) == max(v for v in slow[1] if v is not None)
    assert min(v for v in fast[1] if v is not None) == min(v for v in slow[1] if v is not None)
    assert len(fast[0]) <= 400 and fast[0] == sorted(fast[0])


def test_system_charts_per_node_and_total() -> None:
    from traincard_otel.card.payload import _Mode, system_charts

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
    chart = next(c for c in system_charts(data, _Mode(live=False)) if c["id"] == "cpu")
    labels = [s["label"] for s in chart["series"]]
    assert labels == ["node-a system", "node-b system", "system all nodes (mean)"]
    mean = chart["series"][2]["y"]
    assert mean and all(abs(v - 40.0) < 1e-9 for v in mean)  # percent
