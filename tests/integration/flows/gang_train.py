"""One rank of the gang flow: DDP-style loop on gloo; rank 2 is slow, rank 3 dies or hangs on request.

Each step reports its compute time (before the all-reduce: in synchronous training every rank's
wall step is the slowest rank's, so the compute time is where a straggler shows) and its data wait.
"""

import os
import signal
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

import traincard_otel

MODE = os.environ.get("GANG_MODE", "healthy")
STEPS = int(os.environ.get("GANG_STEPS", "40"))
FAIL_AT = int(os.environ.get("GANG_FAIL_AT", "15"))
SLOW, VICTIM = 2, 3


@record
def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    reporter = traincard_otel.configure()
    reporter.progress(max_steps=STEPS, world_size=dist.get_world_size())
    model = torch.nn.Linear(8, 1)
    for step in range(1, STEPS + 1):
        t0 = time.perf_counter()
        x = torch.randn(16, 8)
        time.sleep(0.005)  # the data loader
        wait = time.perf_counter() - t0
        loss = model(x).pow(2).mean()
        loss.backward()
        time.sleep(0.08 if rank == SLOW else 0.02)
        if rank == VICTIM and step == FAIL_AT:
            reporter.flush()
            if MODE == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif MODE == "hang":
                time.sleep(3600)  # alive, but never reaches the all-reduce: the gang hangs
        reporter.step_end(step, duration_s=time.perf_counter() - t0, data_wait_s=wait)
        if rank == 0:
            reporter.metrics({"loss": float(loss)}, step=step)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad = None
    traincard_otel.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
