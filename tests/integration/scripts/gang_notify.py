"""Two ranks under torchrun (gloo): both see a NaN loss at step 3 (every rank reports metrics), then
rank 1 exits with status 3 while rank 0 waits at a barrier it never passes; torchrun then stops
rank 0. With TRAINCARD_NOTIFY set, only rank 0 sends: one NaN notice, one naming rank 1's failure."""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

import traincard_otel


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    reporter = traincard_otel.configure(report_ranks="all")
    for step in range(1, 11):
        loss = float("nan") if step == 3 else 1.0 / step
        reporter.metrics({"loss": loss}, step)
        reporter.step_end(step, duration_s=0.01)
        dist.all_reduce(torch.zeros(1))
    reporter.flush()  # the NaN judged on every rank
    dist.barrier()
    if rank == 1:
        os._exit(3)
    time.sleep(60)  # rank 0: stopped by torchrun once rank 1 has failed
    sys.exit(0)


if __name__ == "__main__":
    main()
