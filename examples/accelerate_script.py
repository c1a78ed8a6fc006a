"""Accelerate with the traincard tracker: `python examples/accelerate_script.py` (or `accelerate launch`).

TRAINCARD_DIR=/tmp/tc python examples/accelerate_script.py && traincard render /tmp/tc -o card.html
"""

import torch
from accelerate import Accelerator

from traincard_otel.adapters.torch_loop import track
from traincard_otel.integrations import AccelerateTracker


def main(steps: int = 300) -> None:
    accelerator = Accelerator(cpu=True, log_with=[AccelerateTracker()])
    accelerator.init_trackers("accelerate-demo", config={"lr": 1e-2, "steps": steps})
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = accelerator.prepare(model, opt)
    tracker = track(opt, model=model, grad_norm_every=10)  # step times and grad norm, every rank
    for step in range(1, steps + 1):
        x = torch.randn(64, 16)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        tracker.log(batch=x)
        accelerator.log({"loss": loss.item()}, step=step)
    accelerator.end_training()


if __name__ == "__main__":
    main()
