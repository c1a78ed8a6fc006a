"""Realistic card payloads (docs/card-payload.md) for the browser tests, built without a store."""

from __future__ import annotations

import math
import random
from typing import Any

from traincard_otel._read.payload.names import wire_names as names

T0 = 1763800000.0
XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = '"><img src=x onerror=window.__xss=2>'
XSS_CLOSE = "</script><script>window.__xss=3</script>"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 88, in training_step\n'
    "    loss = model(**batch).loss\n"
    '  File "torch/nn/modules/module.py", line 1511, in _call_impl\n'
    "    return forward_call(*args, **kwargs)\n"
    "RuntimeError: NCCL communicator was aborted on rank 1"
)
OOM_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "flow.py", line 41, in train\n'
    "    trainer.train()\n"
    '  File "transformers/trainer.py", line 1938, in train\n'
    "    return inner_training_loop(\n"
    '  File "transformers/trainer.py", line 2279, in _inner_training_loop\n'
    "    tr_loss_step = self.training_step(model, inputs)\n"
    '  File "torch/_tensor.py", line 522, in backward\n'
    "    torch.autograd.backward(\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 79.10 GiB of which 1.12 GiB is free."
)


def _loss(step: int, rng: random.Random) -> float:
    return 0.6 + 2.4 * math.exp(-step / 700) + rng.gauss(0, 0.04)


def _lr(step: int, max_steps: int) -> float:
    warmup = max(1, max_steps // 20)
    if step < warmup:
        return 3e-4 * step / warmup
    return 3e-4 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, max_steps - warmup)))


def training_charts(first: int, last: int, *, max_steps: int = 2000, eval_every: int = 100, seed: int = 1):
    """Training charts with points for steps ``first..last`` (both included)."""
    rng = random.Random(seed + first)
    steps = list(range(first, last + 1))
    evals = [s for s in steps if s % eval_every == 0]
    return [
        {
            "id": "loss",
            "title": "loss",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [
                {"label": "train", "x": steps, "y": [round(_loss(s, rng), 4) for s in steps]},
                {"label": "eval", "x": evals, "y": [round(_loss(s, rng) + 0.08, 4) for s in evals]},
            ],
        },
        {
            "id": "learning_rate",
            "title": "learning_rate",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [{"label": "train", "x": steps, "y": [_lr(s, max_steps) for s in steps]}],
        },
        {
            "id": "grad_norm",
            "title": "grad_norm",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [
                {
                    "label": "train",
                    "x": steps,
                    "y": [round(abs(rng.gauss(1.2, 0.3)) + (4.0 if s % 333 == 0 else 0), 3) for s in steps],
                }
            ],
        },
        {
            "id": "throughput_tokens_per_second",
            "title": "tokens/s",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [
                {
                    "label": f"rank {r}",
                    "x": steps,
                    "y": [round(rng.gauss(41000 - 900 * r, 600)) for s in steps],
                }
                for r in (0, 1)
            ],
        },
    ]


def system_charts(
    t_first: float, t_last: float, *, every: float = 5.0, seed: int = 2
) -> list[dict[str, Any]]:
    rng = random.Random(seed + int(t_first))
    times = [t_first + i * every for i in range(int((t_last - t_first) // every) + 1)]
    return [
        {
            "id": "cpu",
            "title": "CPU utilization",
            "group": "system",
            "unit": "%",
            "x": "time",
            "series": [
                {"label": "system", "x": times, "y": [round(min(100, rng.gauss(62, 6)), 1) for _ in times]},
                {"label": "process", "x": times, "y": [round(min(100, rng.gauss(38, 4)), 1) for _ in times]},
            ],
        },
        {
            "id": "memory",
            "title": "Memory used",
            "group": "system",
            "unit": "GiB",
            "x": "time",
            "series": [
                {"label": "system", "x": times, "y": [round(41 + 0.002 * (t - T0), 2) for t in times]},
                {"label": "system limit", "x": times, "y": [128.0 for _ in times]},
            ],
        },
        {
            "id": "gpu_util",
            "title": "GPU utilization",
            "group": "system",
            "unit": "%",
            "x": "time",
            "series": [
                {
                    "label": f"gpu{g}",
                    "x": times,
                    "y": [round(min(100, rng.gauss(93 - 3 * g, 3)), 1) for _ in times],
                }
                for g in (0, 1)
            ],
        },
        {
            "id": "gpu_mem",
            "title": "GPU memory used",
            "group": "system",
            "unit": "GiB",
            "x": "time",
            "series": [{"label": "gpu0", "x": times, "y": [round(61 + rng.gauss(0, 0.3), 2) for _ in times]}],
        },
    ]


def logs(step: int, *, xss: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(24):
        out.append(
            {
                "time": T0 + i * 4,
                "level": "INFO",
                "rank": i % 2,
                "message": f"{{'loss': {2.0 - i / 30:.4f}, 'learning_rate': 0.0003, 'epoch': {i / 40:.2f}}}",
                "traceback": None,
            }
        )
    out.insert(
        3,
        {"time": T0 + 13, "level": "DEBUG", "rank": 0, "message": "dataloader prefetch=4", "traceback": None},
    )
    out.append(
        {
            "time": T0 + 100,
            "level": "WARNING",
            "rank": 0,
            "message": "Loss spike detected at step 333 (grad_norm 5.2)",
            "traceback": None,
        }
    )
    out.append(
        {
            "time": T0 + 101,
            "level": "ERROR",
            "rank": 1,
            "message": "NCCL watchdog: collective took 31 s",
            "traceback": TRACEBACK,
        }
    )
    out.append(
        {
            "time": T0 + 102,
            "level": "CRITICAL",
            "rank": 1,
            "message": "rank 1 lost its heartbeat",
            "traceback": None,
        }
    )
    if xss:
        out.append(
            {"time": T0 + 103, "level": "WARNING", "rank": 0, "message": XSS_SCRIPT, "traceback": None}
        )
        out.append({"time": T0 + 104, "level": "INFO", "rank": 0, "message": XSS_IMG, "traceback": XSS_CLOSE})
    out.append(
        {
            "time": T0 + 105,
            "level": "INFO",
            "rank": 0,
            "message": f"step {step}: saved checkpoint-{step}",
            "traceback": None,
        }
    )
    return out


def checkpoints() -> list[dict[str, Any]]:
    return [
        {
            "step": 200,
            "path": "out/checkpoint-200",
            "size_bytes": 1_288_490_189,
            "time": T0 + 200,
            "best": False,
            "metric": "eval_loss",
            "value": 1.93,
        },
        {
            "step": 400,
            "path": "out/checkpoint-400",
            "size_bytes": 1_288_490_189,
            "time": T0 + 400,
            "best": True,
            "metric": "eval_loss",
            "value": 1.41,
        },
        {
            "step": 600,
            "path": "s3://bucket/runs/FinetuneFlow/1763/checkpoint-600",
            "size_bytes": 1_288_490_201,
            "time": T0 + 600,
            "best": False,
            "metric": "eval_loss",
            "value": 1.47,
        },
    ]


def run(step: int, *, status: str = "running", max_steps: int | None = 2000, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "title": "FinetuneFlow/1763/train/2",
        "status": status,
        "phase": "train",
        "step": step,
        "max_steps": max_steps,
        "epoch": round(step / 1000, 3),
        "num_epochs": 2,
        "started_at": T0,
        "updated_at": T0 + step,
        "elapsed_s": float(step),
        "eta_s": float((max_steps or step) - step) if status == "running" else None,
        "batch_size": 32,
        "world_size": 2,
        "attempt": 1,
        "restarts": 1,
        "heartbeat_age_s": 1.2 if status == "running" else None,
        "cost": {"hourly": 2.5, "so_far": 2.5 * step / 3600, "at_eta": 2.5 * (max_steps or step) / 3600},
    }
    out.update(extra)
    return out


def markers() -> list[dict[str, Any]]:
    return [
        {"x": 300, "label": "attempt 1 (retry)", "kind": "restart"},
        {"x": 450, "label": "resumed at step 450", "kind": "rewind"},
    ]


def system_section() -> dict[str, Any]:
    return {
        "notes": ["No GPU power figures: NVML does not report power on this device."],
        "latest": [
            {"name": "system.cpu.utilization", "label": "CPU", "value": 0.62, "unit": "1"},
            {
                "name": "system.memory.usage{system.memory.state=used}",
                "label": "Memory used",
                "value": 44_023_414_784,
                "unit": "By",
            },
            {"name": "hw.gpu.utilization[gpu0]", "label": "gpu0 utilization", "value": 0.93, "unit": "1"},
            {"name": "hw.temperature[gpu0]", "label": "gpu0 temperature", "value": 71, "unit": "Cel"},
        ],
        "units": {
            "hw.gpu.memory.usage": "By",
            "hw.gpu.utilization": "1",
            "hw.power": "W",
            "hw.errors": "{error}",
            "system.memory.utilization": "1",
        },
    }


def running_payload(step: int = 600, *, max_steps: int = 2000) -> dict[str, Any]:
    """A run in progress (attempt 1 after one retry) with every section filled."""
    return {
        "v": 1,
        "final": False,
        "live": False,
        "generated_at": T0 + step,
        "names": names(),
        "run": run(step, max_steps=max_steps),
        "banners": [
            {"kind": "dropped", "text": "12 telemetry records were dropped: {'buffer_full': 12}"},
            {"kind": "resumed", "text": "Attempt 1: restarted 1 time(s); earlier attempts are kept"},
            {"kind": "stalled", "text": "Stalled for 3 min: no step progress since step 600"},
        ],
        "charts": training_charts(1, step, max_steps=max_steps) + system_charts(T0, T0 + step),
        "markers": markers(),
        "checkpoints": checkpoints(),
        "logs": logs(step),
        "failure": None,
        "system": system_section(),
        "stats": {"dropped": {"buffer_full": 12}, "corrupt_segments": 1, "segments": 12, "points": 48_000},
    }


def live_update(prev_step: int, step: int, *, max_steps: int = 2000, overlap: int = 5) -> dict[str, Any]:
    """What ``metaflow_card_update`` receives: only the tail of each series (overlapping what is drawn)."""
    payload = running_payload(step, max_steps=max_steps)
    payload["live"] = True
    payload["charts"] = training_charts(
        max(1, prev_step - overlap), step, max_steps=max_steps
    ) + system_charts(T0 + prev_step - 10, T0 + step)
    payload["logs"] = logs(step, xss=False)[-10:]
    payload["banners"] = [
        {"kind": "resumed", "text": "Attempt 1: restarted 1 time(s); earlier attempts are kept"}
    ]
    return payload


def failed_payload() -> dict[str, Any]:
    """A run that died with a CUDA OOM; the verdict lists its evidence."""
    step = 740
    payload = running_payload(step)
    payload["final"] = True
    payload["run"] = run(step, status="failed", phase="train")
    payload["banners"] = [
        {"kind": "resumed", "text": "Attempt 1: restarted 1 time(s); earlier attempts are kept"},
        {
            "kind": "failed",
            "text": "Training failed: torch.OutOfMemoryError: CUDA out of memory — likely GPU OOM",
        },
    ]
    payload["failure"] = {
        "type": "torch.OutOfMemoryError",
        "message": "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
        "of which 1.12 GiB is free.",
        "traceback": OOM_TRACEBACK,
        "phase": "train",
        "step": step,
        "last_metrics": {"loss": 1.2873, "learning_rate": 0.000271, "grad_norm": 1.31},
        "last_system": {
            "hw.gpu.memory.usage[gpu0]": 83_751_862_272,
            "hw.gpu.utilization[gpu0]": 0.97,
            "hw.power[gpu0]": 612.5,
            "hw.errors[gpu0]{error.type=uncorrected}": 0,
            "system.memory.utilization{system.memory.state=used}": 0.41,
        },
        "verdict": {
            "kind": "cuda_oom",
            "text": "The GPU ran out of memory",
            "evidence": [
                "exception type torch.OutOfMemoryError",
                "message contains 'CUDA out of memory'",
                "GPU 0 memory at 98.7% of capacity in the last sample",
            ],
        },
    }
    return payload


def final_payload() -> dict[str, Any]:
    payload = running_payload(2000)
    payload["final"] = True
    payload["run"] = run(2000, status="finished", phase="")
    payload["banners"] = [{"kind": "info", "text": "Input-bound: 14% of step time is spent waiting for data"}]
    return payload


def big_payload(points: int = 100_000) -> dict[str, Any]:
    """A long run: ``points`` points in each training series (eval on its own sparser x)."""
    payload = running_payload(600)
    steps = list(range(1, points + 1))
    rng = random.Random(7)
    loss = [round(_loss(s // 50, rng), 4) for s in steps]
    evals = steps[999::1000]
    payload["run"] = run(points, max_steps=points * 2)
    payload["charts"] = [
        {
            "id": "loss",
            "title": "loss",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [
                {"label": "train", "x": steps, "y": loss},
                {"label": "eval", "x": evals, "y": [loss[s - 1] + 0.05 for s in evals]},
            ],
        },
        {
            "id": "grad_norm",
            "title": "grad_norm",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [
                {"label": "train", "x": steps, "y": [round(abs(rng.gauss(1.0, 0.2)), 3) for _ in steps]},
            ],
        },
        {
            "id": "throughput_tokens_per_second",
            "title": "tokens/s",
            "group": "training",
            "unit": "",
            "x": "step",
            "series": [{"label": "rank 0", "x": steps, "y": [40000 + (s % 997) for s in steps]}],
        },
        *system_charts(T0, T0 + 20 * points / 10, every=20.0),
    ]
    payload["markers"] = [{"x": points // 2, "label": "attempt 1 (retry)", "kind": "restart"}]
    return payload


def empty_payload() -> dict[str, Any]:
    """A run that has just started: nothing but the header."""
    return {
        "v": 1,
        "final": False,
        "live": False,
        "generated_at": T0,
        "names": names(),
        "run": run(0, max_steps=None, restarts=0, attempt=0, cost=None, eta_s=None, epoch=None),
        "banners": [],
        "charts": [],
        "markers": [],
        "checkpoints": [],
        "logs": [],
        "failure": None,
        "system": {"notes": [], "latest": []},
        "stats": {"dropped": {}, "corrupt_segments": 0, "segments": 0, "points": 0},
    }


def xss_payload() -> dict[str, Any]:
    """Hostile strings in every place the payload carries text."""
    payload = failed_payload()
    payload["run"]["title"] = XSS_CLOSE + XSS_IMG
    payload["run"]["phase"] = XSS_IMG
    payload["banners"].append({"kind": "info", "text": XSS_SCRIPT + XSS_IMG})
    payload["banners"].append({"kind": XSS_IMG, "text": "unknown kind"})
    payload["charts"][0]["title"] = XSS_IMG
    payload["charts"][0]["series"][0]["label"] = XSS_SCRIPT
    payload["charts"].append(
        {
            "id": XSS_IMG,
            "title": XSS_CLOSE,
            "group": "training",
            "unit": XSS_IMG,
            "x": "step",
            "series": [{"label": XSS_IMG, "x": [1, 2, 3], "y": [1.0, 2.0, 3.0]}],
        }
    )
    payload["markers"].append({"x": 100, "label": XSS_IMG, "kind": "restart"})
    payload["checkpoints"][0]["path"] = XSS_IMG
    payload["checkpoints"][1]["metric"] = XSS_SCRIPT
    payload["system"]["notes"].append(XSS_SCRIPT)
    payload["system"]["latest"].append(
        {"name": XSS_IMG, "label": XSS_IMG, "value": XSS_SCRIPT, "unit": XSS_IMG}
    )
    payload["failure"]["type"] = XSS_SCRIPT
    payload["failure"]["message"] = XSS_CLOSE + XSS_IMG
    payload["failure"]["traceback"] = XSS_CLOSE
    payload["failure"]["last_metrics"][XSS_IMG] = XSS_SCRIPT
    payload["failure"]["verdict"]["evidence"].append(XSS_IMG)
    payload["stats"]["dropped"][XSS_IMG] = 1
    return payload
