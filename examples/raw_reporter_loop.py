"""A hand-written PyTorch loop reporting through the Reporter API (runs as a plain script).

TRAINCARD_DIR=traincard-data python examples/raw_reporter_loop.py --steps 200 [--checkpoint-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

import traincard_otel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.0, help="extra seconds per step")
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--checkpoint-dir", default="raw-loop-checkpoints", help="kept after the run")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(512, 16), torch.randn(512, 1)
    reporter = traincard_otel.configure()
    reporter.progress(max_steps=args.steps, batch_size=32, world_size=1, num_epochs=1)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    with reporter.phase("train"):
        for step in range(1, args.steps + 1):
            t0 = time.perf_counter()
            idx = torch.randint(0, 512, (32,))
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(args.sleep)
            reporter.metrics({"loss": loss.detach(), "lr": opt.param_groups[0]["lr"]}, step=step)
            reporter.step_end(step, duration_s=time.perf_counter() - t0, samples=32)
            print(f"step {step}", flush=True)
            if step % args.checkpoint_every == 0:
                with reporter.phase("save"):
                    path = os.path.join(args.checkpoint_dir, f"ckpt-{step}.pt")
                    torch.save(model.state_dict(), path)
                    reporter.checkpoint(path, step=step, metadata={"metric": "loss", "value": float(loss)})
    reporter.log("training done")


if __name__ == "__main__":
    main()
