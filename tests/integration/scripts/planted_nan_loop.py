"""A real regression loop whose batch at --nan-at has a NaN input; it keeps training afterwards
(skipping that step's update), slowly, so that a scraper sees the counter before and after.
With ``--nan-when FILE`` the NaN comes at the first step from --nan-at on at which FILE exists (the
test creates it once the scraper has seen the counter at 0)."""

from __future__ import annotations

import argparse
import os
import time

import torch

import traincard_otel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--nan-at", type=int, default=60)
    parser.add_argument("--sleep", type=float, default=0.02)
    parser.add_argument("--nan-when", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(1024, 8)
    y = x @ torch.randn(8, 1)
    reporter = traincard_otel.configure()
    nan_step = None
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        idx = torch.randint(0, 1024, (64,))
        xb = x[idx].clone()
        ready = args.nan_when is None or os.path.exists(args.nan_when)
        if nan_step is None and step >= args.nan_at and ready:
            nan_step = step
        if step == nan_step:
            xb[0, 0] = float("nan")
        loss = torch.nn.functional.mse_loss(model(xb), y[idx])
        opt.zero_grad()
        loss.backward()
        if step != nan_step:
            opt.step()
        time.sleep(args.sleep)
        reporter.metrics({"loss": loss.detach()}, step=step)
        reporter.step_end(step, duration_s=time.perf_counter() - t0, samples=64)


if __name__ == "__main__":
    main()
