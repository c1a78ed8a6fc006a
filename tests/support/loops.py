"""A tiny raw training loop, shared by the tests and the scripts they start: an MLP, and steps of it
instrumented with ``instrument(optimizer, model=model)``."""

from __future__ import annotations

import time
from typing import Any


def mlp(width: int = 16, hidden: int = 32) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))


def train(tracker: Any, model: Any, opt: Any, steps: int, *, sleep_s: float = 0.0, batch: int = 8) -> None:
    """``steps`` steps of ``model`` on random batches, each logged with its loss and batch."""
    import torch

    width = next(iter(model.parameters())).shape[-1]
    for _ in range(steps):
        x = torch.randn(batch, width)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=x)
        if sleep_s:
            time.sleep(sleep_s)
