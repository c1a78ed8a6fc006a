"""The GPU check (``make gpu-check``): a GPT-2-sized model (124M parameters, built from
``GPT2Config``, synthetic tokens) trained on a real GPU as people train it: the HF Trainer in bf16
with DataLoader workers, and a raw loop reporting its CUDA loss every step.

Checked: the card's MFU within 5 % of a hand count (6·N + 12·L·d·T FLOPs per token, tokens timed
around the same steps, the peak of :data:`traincard_otel._analysis.flops.PEAK_TFLOPS`); reporting
a CUDA tensor every step costs the training thread no wait for the GPU (host time with and
without); every system series one sample per interval, strictly ordered in time. The figures are
printed (``GPU CHECK ...``) for docs/performance.md. Skipped without an NVIDIA GPU.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.efficiency import efficiency
from traincard_otel._analysis.flops import peak_flops

SEQ, BATCH, STEPS, TIMED_FROM = 512, 8, 200, 20
INTERVAL_S = 0.5


def _efficiency(run: traincard_otel.RunData) -> dict[str, Any] | None:
    """The card's efficiency figures (MFU and what it is made of) as a dict."""
    e = efficiency(run)
    return e.as_dict() if e is not None else None


def _cuda() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(_cuda() is None, reason="no CUDA device (torch sees none, or no torch)"),
]


def _gpt2() -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config())  # 124M: 12 layers, 768 wide, 50257 tokens


class _Tokens:
    """Synthetic causal-LM examples of ``SEQ`` random token ids."""

    def __init__(self, n: int) -> None:
        import torch

        self.ids = torch.randint(0, 50257, (n, SEQ), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": ids.new_ones(ids.shape), "labels": ids.clone()}


def test_hf_gpt2_with_dataloader_workers_mfu_and_system_series(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    torch = _cuda()
    monkeypatch.setenv("TRAINCARD_SYSTEM", "true")
    monkeypatch.setenv("TRAINCARD_SYSTEM_INTERVAL", str(INTERVAL_S))
    marks: dict[int, float] = {}
    ends: list[float] = []

    class HandClock(TrainerCallback):
        """The hand count's clock: the GPU drained at two step ends, steps in between timed."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ends.append(time.perf_counter())
            if state.global_step in (TIMED_FROM, STEPS):
                torch.cuda.synchronize()
                marks[state.global_step] = time.perf_counter()

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=BATCH,
        max_steps=STEPS,
        bf16=True,
        dataloader_num_workers=2,
        logging_steps=10,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
    model = _gpt2()
    trainer = Trainer(model=model, args=args, train_dataset=_Tokens(BATCH * STEPS), callbacks=[HandClock()])
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()
    assert trainer.args.device.type == "cuda"

    run = traincard_otel.load(store_dir)
    assert run.step_times[0].steps == list(range(1, STEPS + 1))
    tokens_per_s = (STEPS - TIMED_FROM) * BATCH * SEQ / (marks[STEPS] - marks[TIMED_FROM])
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)  # tied weights once
    per_token = 6 * params + 12 * 12 * 768 * SEQ
    device = torch.cuda.get_device_name(0)
    peak = peak_flops(device, "bf16").flops
    e = _efficiency(run)
    assert e is not None and e["dtype"] == "bf16" and e["seq_len"] == pytest.approx(SEQ)
    assert e["flops_per_token"] == pytest.approx(per_token, rel=1e-6)

    # One sample per interval, strictly increasing: no stale copy from a DataLoader worker. (The
    # last point may follow closely: the final reading at shutdown.)
    for series in run.system.values():
        gaps = [b - a for a, b in zip(series.times, series.times[1:], strict=False)]
        assert len(gaps) >= 4 and all(g > 0 for g in gaps), (series.name, series.tags, gaps)
        assert all(g >= 0.5 * INTERVAL_S for g in gaps[:-1]), (series.name, series.tags, gaps)
    util = [s for s in run.system.values() if s.name == "hw.gpu.utilization"]
    assert util and max(max(s.values) for s in util) > 0

    # The card's MFU is its median step's (the last 50 steps): counted by hand from the step ends
    # this callback timed. The mean over the steps from TIMED_FROM (the GPU drained at both ends) is
    # printed beside it: a run's slow steps move it several percent either way.
    recent = [b - a for a, b in zip(ends[-51:-1], ends[-50:], strict=True)]
    hand = per_token * BATCH * SEQ / statistics.median(recent) / peak if peak else None
    figures = {
        "device": device,
        "card_mfu": e["mfu"],
        "hand_mfu": hand,
        "hand_mfu_mean": per_token * tokens_per_s / peak if peak else None,
        "hand_median_step_s_last50": statistics.median(recent),
        "card_median_step_s_last50": statistics.median(run.step_times[0].values[-50:]),
    }
    print("GPU CHECK", json.dumps(figures))
    if peak is None:
        pytest.skip(f"{device} is not in the peak table: MFU not compared")
    assert e["peak_flops"] == peak
    assert e["mfu"] == pytest.approx(hand, rel=0.05)


def test_reporting_the_cuda_loss_every_step_does_not_hold_the_training_thread(store_dir: Path) -> None:
    torch = _cuda()
    model = _gpt2().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tracker = traincard_otel.instrument(opt, model=model)
    ids = torch.randint(0, 50257, (BATCH, SEQ), device="cuda")

    def steps(n: int, report: bool) -> tuple[float, float]:
        """(host seconds to queue ``n`` steps, seconds until the GPU ran them)."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            if report:
                tracker.log(loss=loss.detach(), batch={"input_ids": ids})  # type: ignore[attr-defined]
        host = time.perf_counter() - t0
        torch.cuda.synchronize()
        return host, time.perf_counter() - t0

    steps(5, True)  # warm-up: kernels chosen, allocator filled
    rounds = [(steps(40, False), steps(40, True)) for _ in range(2)]
    (without, gpu_without), (with_, gpu_with) = (min(r[i] for r in rounds) for i in (0, 1))
    tracker.close()  # type: ignore[attr-defined]
    traincard_otel.shutdown()
    figures = {
        "host_s_without": without,
        "host_s_with": with_,
        "gpu_s_without": gpu_without,
        "gpu_s_with": gpu_with,
    }
    print("GPU CHECK", json.dumps(figures))

    run = traincard_otel.load(store_dir)
    assert len(run.metrics["loss"].values) == 5 + 2 * 40
    # A report that waited for the loss would make the host keep pace with the GPU every step.
    assert with_ <= without * 1.10 + 0.05, (with_, without, gpu_with)
