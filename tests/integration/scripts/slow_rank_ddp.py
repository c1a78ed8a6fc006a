"""One rank of ``torchrun --nproc_per_node=2``: DDP on gloo, a raw loop instrumented with its model;
rank 1's forward is planted slow (``SLOW_RANK_S`` a step), so rank 0 waits for it in the
gradients' all-reduce."""

import os
import time

import torch
import torch.distributed as dist

import traincard_otel

STEPS = int(os.environ.get("SLOW_RANK_STEPS", "15"))
SLOW_S = float(os.environ.get("SLOW_RANK_S", "0.08"))


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    if rank == 1:
        net[0].register_forward_hook(lambda module, args, output: time.sleep(SLOW_S))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(opt, model=model)
    for _ in range(STEPS):
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=x)  # type: ignore[attr-defined]
    dist.barrier()
    traincard_otel.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
