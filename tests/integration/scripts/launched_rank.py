"""One rank of a job as a launcher starts it: a DDP loop on gloo (CPU), written as people write it.

Started by ``python -m torch.distributed.run``, by ``srun`` (here: SLURM's variables set on plain
processes) or by ``accelerate launch``. Rank 0 reports the training metrics; every rank reports
its step ends. ``LAUNCH_KILL_RANK=1 LAUNCH_KILL_AT=50``: that rank kills itself with SIGKILL as
step 50 starts, without a word (no flush, as the OOM killer would).
"""

import os
import signal
import time

import torch
import torch.distributed as dist

import traincard_otel

STEPS = int(os.environ.get("LAUNCH_STEPS", "60"))
KILL_RANK = int(os.environ.get("LAUNCH_KILL_RANK", "-1"))
KILL_AT = int(os.environ.get("LAUNCH_KILL_AT", "50"))
STEP_S = float(os.environ.get("LAUNCH_STEP_S", "0.1"))


def main() -> None:
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    else:  # under srun: the rank and world size are SLURM's
        dist.init_process_group(
            "gloo", rank=int(os.environ["SLURM_PROCID"]), world_size=int(os.environ["SLURM_NTASKS"])
        )
    rank = dist.get_rank()
    reporter = traincard_otel.configure()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(1, STEPS + 1):
        if rank == KILL_RANK and step == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.perf_counter()
        x = torch.randn(16, 8)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(STEP_S)
        reporter.step_end(step, duration_s=time.perf_counter() - t0)
        if rank == 0:
            reporter.metrics({"loss": float(loss)}, step=step)
    dist.barrier()
    traincard_otel.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
