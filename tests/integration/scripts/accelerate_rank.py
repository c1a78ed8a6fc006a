"""One process of ``accelerate launch --cpu --num_processes 2``: an Accelerate loop, instrumented in
one line; the main process logs the loss, every process reports its step ends."""

import os
import time

import torch
from accelerate import Accelerator

import traincard_otel

STEPS = int(os.environ.get("LAUNCH_STEPS", "20"))


def main() -> None:
    accelerator = Accelerator(cpu=True)
    traincard_otel.instrument(accelerator)
    reporter = traincard_otel.configure()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt = accelerator.prepare(model, opt)
    for step in range(1, STEPS + 1):
        t0 = time.perf_counter()
        x = torch.randn(16, 8)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        time.sleep(0.02)
        reporter.step_end(step, duration_s=time.perf_counter() - t0)
        accelerator.log({"loss": loss.item()}, step=step)
    accelerator.wait_for_everyone()
    accelerator.end_training()
    traincard_otel.shutdown()


if __name__ == "__main__":
    main()
