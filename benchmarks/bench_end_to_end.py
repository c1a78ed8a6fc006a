"""End to end: a Hugging Face Trainer on a tiny GPT-2 (CPU), logging every step, with and without
traincard (system telemetry and the store on), in fresh processes interleaved ABBA.

    python -m benchmarks.bench_end_to_end [--steps 400] [--rounds 3] [--quick] [--json out.json]

Each child times its own optimizer steps (median of on_step_end intervals after a warm-up), so
process start-up and model construction are not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import spread, table

REPO = Path(__file__).resolve().parent.parent


def child(mode: str, steps: int) -> None:
    sys.path.insert(0, str(REPO / "examples"))
    import torch
    from tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args
    from transformers import Trainer, TrainerCallback

    torch.set_num_threads(1)
    times: list[float] = []

    class Clock(TrainerCallback):
        last = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    with tempfile.TemporaryDirectory() as out:
        args = training_args(
            out,
            max_steps=steps,
            logging_steps=1,
            eval_strategy="no",
            save_strategy="no",
            per_device_train_batch_size=4,
            warmup_steps=0,
        )
        trainer = Trainer(
            model=tiny_gpt2(n_layer=1, n_embd=32),
            args=args,
            train_dataset=ProgressionDataset(512),
            callbacks=[Clock()],
        )
        if mode == "traincard":
            import traincard_otel

            traincard_otel.instrument(trainer)
        trainer.train()
    warm = times[len(times) // 5 :]
    print(json.dumps({"median_step_s": statistics.median(warm), "steps": len(warm)}))


def _run(mode: str, steps: int, tmp: str) -> float:
    env = dict(os.environ, TRAINCARD_DIR=f"{tmp}/{mode}-{time.monotonic_ns()}", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_end_to_end", "--child", mode, "--steps", str(steps)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return float(json.loads(out.stdout.strip().splitlines()[-1])["median_step_s"])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Interleaved plain/instrumented runs; prints median step time per mode and the overhead."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", choices=["plain", "traincard"], default=None)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.steps)
        return {}
    steps, rounds = (30, 1) if args.quick else (args.steps, args.rounds)
    results: dict[str, list[float]] = {"plain": [], "traincard": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for mode in ("plain", "traincard") if r % 2 == 0 else ("traincard", "plain"):
                for _ in range(2 if not args.quick else 1):  # ABBA inside each round as well
                    results[mode].append(_run(mode, steps, tmp))
    plain, ours = spread(results["plain"]), spread(results["traincard"])
    overhead = ours["median"] / plain["median"] - 1
    rows = [
        {
            "mode": m,
            "median_step_ms": s["median"] * 1e3,
            "p25_ms": s["p25"] * 1e3,
            "p75_ms": s["p75"] * 1e3,
            "runs": s["n"],
        }
        for m, s in (("plain", plain), ("traincard", ours))
    ]
    print(table(rows, ["mode", "median_step_ms", "p25_ms", "p75_ms", "runs"]))
    print(f"step-time overhead: {overhead * 100:+.2f} %")
    out = {
        "benchmark": "end_to_end_hf",
        "steps": steps,
        "rounds": rounds,
        "raw": results,
        "results": rows,
        "overhead": overhead,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
