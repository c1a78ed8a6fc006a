"""DDP on CPU (gloo) with a raw loop: `torchrun --nproc_per_node=2 examples/ddp_raw_loop.py`.

Rank 0 reports the training metrics; every rank reports its step ends (step time per rank in the
card); local rank 0 samples the node. Set TRAINCARD_DIR so all ranks write one store.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import traincard_otel


def main(steps: int = 40) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    tracker = traincard_otel.instrument(opt)
    for _ in range(steps):
        x = torch.randn(32, 16)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=x)  # type: ignore[attr-defined]
    dist.barrier()
    traincard_otel.shutdown()
    dist.destroy_process_group()
    print(f"rank {rank} of {os.environ.get('WORLD_SIZE')} done", flush=True)


if __name__ == "__main__":
    main()
