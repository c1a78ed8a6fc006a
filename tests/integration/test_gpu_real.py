"""Real NVML and CUDA on a real GPU (these run only where one is present; CI has none)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._read.load.reader import RunData, Series
from traincard_otel._read.payload import build_payload
from traincard_otel._write.telemetry.gpu import GpuSampler

from tests.support.helpers import subprocess_env


def _nvml_ready() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        return bool(pynvml.nvmlDeviceGetCount())
    except Exception:
        return False


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _nvml_ready(), reason="no NVIDIA GPU / NVML on this machine"),
]


def _system(run: RunData, name: str, **tags: str) -> list[Series]:
    return [
        s for s in run.system.values() if s.name == name and all(s.tags.get(k) == v for k, v in tags.items())
    ]


def test_real_gpu_figures_are_plausible() -> None:
    gpu = GpuSampler()
    gpu.start()
    assert gpu.active, gpu.notes
    samples = gpu.sample()
    by_name: dict[str, list[float]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s.value)
    assert all(0.0 <= v <= 1.0 for v in by_name["hw.gpu.utilization"])
    assert all(
        0 < used <= total
        for used, total in zip(by_name["hw.gpu.memory.usage"], by_name["hw.gpu.memory.limit"], strict=True)
    )
    assert all(10 <= t <= 100 for t in by_name["hw.temperature"])
    if "hw.power" in by_name:
        assert all(5 <= w <= 1500 for w in by_name["hw.power"])
    print({k: v[:2] for k, v in by_name.items()})


@pytest.mark.slow
def test_hf_trainer_on_the_gpu_records_its_gpu_and_allocator_and_charts_them(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuda: Any
) -> None:
    from examples.tiny_gpt2 import trainer as make_trainer

    monkeypatch.setenv("TRAINCARD_SYSTEM", "true")
    monkeypatch.setenv("TRAINCARD_SYSTEM_INTERVAL", "0.2")
    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=300, logging_steps=10, eval_steps=100, save_steps=300, use_cpu=False
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    assert trainer.args.device.type == "cuda"
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    history = trainer.state.log_history
    assert run.metrics["loss"].values == [h["loss"] for h in history if "loss" in h]
    assert run.throughput["tokens_per_second{rank=0}"].values[-1] > 0

    (util,) = _system(run, "hw.gpu.utilization", **{"hw.id": "gpu0"})
    assert all(0.0 <= v <= 1.0 for v in util.values) and max(util.values) > 0  # the GPU did work
    (used,) = _system(run, "hw.gpu.memory.usage", **{"hw.id": "gpu0"})
    (limit,) = _system(run, "hw.gpu.memory.limit", **{"hw.id": "gpu0"})
    assert 0 < max(used.values) <= limit.values[-1]
    (peak,) = _system(run, "traincard.gpu.torch.memory", **{"traincard.torch.memory.kind": "peak"})
    (reserved,) = _system(run, "traincard.gpu.torch.memory", **{"traincard.torch.memory.kind": "reserved"})
    assert 0 < peak.values[-1] <= reserved.values[-1] <= max(used.values)
    assert peak.values[-1] <= cuda.cuda.max_memory_allocated(0)

    payload = build_payload(run, final=True)
    charts = {c["id"]: c for c in payload["charts"]}
    assert {"gpu_util", "gpu_mem", "gpu_temp"} <= set(charts)
    assert {"gpu0", "gpu0 limit", "gpu0 torch peak"} <= {s["label"] for s in charts["gpu_mem"]["series"]}
    assert any(k.startswith("hw.gpu.memory.usage") for k in run.status["last_system"])
    tiles = {t["label"]: t for t in payload["system"]["latest"]}
    assert {"gpu0 utilization", "gpu0 memory used", "gpu0 torch peak", "gpu0 temperature"} <= set(tiles)
    assert tiles["gpu0 memory used"]["unit"] == "By" and tiles["gpu0 temperature"]["unit"] == "Cel"


@pytest.mark.slow
def test_a_real_cuda_oom_in_a_raw_loop_gets_the_verdict_and_the_gpu_state(tmp_path: Path, cuda: Any) -> None:
    store = tmp_path / "store"
    script = tmp_path / "oom.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, time, torch, traincard_otel
            model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1))
            model = model.cuda()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            tracker = traincard_otel.instrument(opt)
            losses = []
            for step in range(1, 41):
                x = torch.randn(256, 512, device="cuda")
                loss = model(x).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                tracker.log(loss=loss.detach(), batch=x)  # a CUDA tensor: read off the training thread
                losses.append(loss.item())
            print(json.dumps(losses), flush=True)
            time.sleep(0.6)  # a system sample or two
            total = torch.cuda.get_device_properties(0).total_memory
            torch.empty(2 * total, dtype=torch.uint8, device="cuda")
            """
        )
    )
    env = subprocess_env(TRAINCARD_DIR=str(store), TRAINCARD_SYSTEM_INTERVAL="0.2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and "OutOfMemoryError" in proc.stderr, proc.stderr[-2000:]
    losses = json.loads(proc.stdout.strip().splitlines()[-1])

    run = traincard_otel.load(store)
    assert run.metrics["loss"].values == losses and run.metrics["loss"].steps == list(range(1, 41))
    failure = run.status["failure"]
    assert failure["type"].endswith("OutOfMemoryError") and failure["step"] == 40
    assert failure["verdict"]["kind"] == "cuda_oom"
    assert "CUDA out of memory" in failure["message"]
    assert failure["last_metrics"]["loss"] == losses[-1]
    assert any(k.startswith("hw.gpu.memory.usage") for k in failure["last_system"])
    assert run.status["status"] == "failed"


def test_reporting_cuda_tensors_never_makes_the_training_thread_wait_for_the_gpu(
    store_dir: Path, cuda: Any
) -> None:
    from traincard_otel.adapters.torch_loop import track

    torch = cuda
    model = torch.nn.Linear(64, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    tracker = track(opt, model=model, grad_norm_every=1)  # the grad norm too, as a tensor
    x = torch.randn(32, 64, device="cuda")
    model(x).square().mean().backward()  # CUDA and cuBLAS initialised before the clock starts
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(2):  # the second reading, with the GPU's clocks up
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        end.synchronize()
    cycles = int(20_000_000 * 150 / start.elapsed_time(end))  # a spin of about 150 ms

    losses = []
    t0 = time.perf_counter()
    for _ in range(10):
        torch.cuda._sleep(cycles)  # this step's loss exists only once the GPU is past the spin
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=x)
        losses.append(loss.detach())
    queued_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    gpu_s = time.perf_counter() - t0
    # Ten steps queued in a fraction of the time the GPU needs for them: the loop never waited.
    assert gpu_s > 0.75 and queued_s < 0.2 * gpu_s, (queued_s, gpu_s)

    tracker.close()
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].values == [v.item() for v in losses]
    assert run.metrics["grad_norm"].steps == list(range(1, 11))
    assert all(v > 0 for v in run.metrics["grad_norm"].values)


def test_mfu_of_a_tiny_gpt2_on_the_gpu_matches_a_hand_calculation(tmp_path: Path, cuda: Any) -> None:
    """The card's MFU against tokens counted and timed by hand around the same loop."""
    pytest.importorskip("transformers")
    from traincard_otel._analysis.efficiency import efficiency
    from traincard_otel._analysis.flops import peak_flops

    store = tmp_path / "store"
    script = tmp_path / "mfu.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, statistics, time, torch, traincard_otel
            from examples.tiny_gpt2 import tiny_gpt2

            model = tiny_gpt2(vocab=512, n_layer=4, n_embd=256, n_head=4, n_positions=128).cuda()
            model = model.to(torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            tracker = traincard_otel.instrument(opt, model=model)
            batch, seq = 32, 128
            ends = []
            for step in range(1, 401):
                if step == 101:  # after warm-up
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                ids = torch.randint(0, 512, (batch, seq), device="cuda")
                loss = model(input_ids=ids, labels=ids).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                tracker.log(loss=loss.detach(), batch={"input_ids": ids})
                ends.append(time.perf_counter())
            torch.cuda.synchronize()
            mean_rate = 300 * batch * seq / (time.perf_counter() - t0)
            # the card's statistic, counted by hand: the median rate of the last 50 steps
            rates = [batch * seq / (b - a) for a, b in zip(ends[-51:-1], ends[-50:])]
            params = sum(p.numel() for p in model.parameters())
            print(json.dumps({"tokens_per_s": statistics.median(rates), "mean_tokens_per_s": mean_rate,
                              "params": params, "device": torch.cuda.get_device_name(0)}), flush=True)
            """
        )
    )
    env = subprocess_env(TRAINCARD_DIR=str(store), TRAINCARD_SYSTEM="false")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hand = json.loads(proc.stdout.strip().splitlines()[-1])
    peak = peak_flops(hand["device"], "bf16").flops
    if peak is None:
        pytest.skip(f"{hand['device']} is not in the peak table")
    per_token = 6 * hand["params"] + 12 * 4 * 256 * 128  # dense + attention (L x d x T)
    expected = per_token * hand["tokens_per_s"] / peak

    e = efficiency(traincard_otel.load(store)).as_dict()
    assert e is not None and e["peak_flops"] == peak and e["dtype"] == "bf16"
    assert e["flops_per_token"] == pytest.approx(per_token, rel=1e-6)
    print("GPU CHECK", json.dumps({"card_mfu": e["mfu"], "hand_mfu": expected, **hand}))
    assert e["mfu"] == pytest.approx(expected, rel=0.10)
