"""A gloo gang (plain torchrun, CPU) in which one rank hangs outside a collective while the others
wait for it in ``all_reduce``.

HANG_SCENARIO=sleep|deadlock|skip HANG_CULPRIT=1 [HANG_BACKEND=nccl] torchrun --nproc_per_node=2 hung_gang.py

* sleep: the culprit sleeps in ``fetch_batch`` at step ``HANG_AT`` (a stuck data fetch);
* deadlock: the culprit's main thread and a helper thread take two locks in opposite orders;
* skip: the culprit skips the collective of step ``HANG_AT``, finishes its loop one collective
  short and waits in ``finish``, while the others wait in the last step's ``all_reduce``.
"""

import os
import threading
import time

import torch
import torch.distributed as dist

import traincard_otel

SCENARIO = os.environ["HANG_SCENARIO"]
CULPRIT = int(os.environ.get("HANG_CULPRIT", "1"))
HANG_AT = int(os.environ.get("HANG_AT", "8"))
STEPS = int(os.environ.get("HANG_STEPS", "12"))


def fetch_batch(rank: int, step: int) -> torch.Tensor:
    if SCENARIO == "sleep" and rank == CULPRIT and step == HANG_AT:
        time.sleep(3600)
    batch = torch.ones(4) * step
    return batch.cuda() if dist.get_backend() == "nccl" else batch


def update_cache(first: threading.Lock, second: threading.Lock, both_hold: threading.Barrier) -> None:
    with first:
        both_hold.wait()
        with second:  # the helper holds it and waits for ``first``: neither moves again
            pass


def deadlock() -> None:
    a, b = threading.Lock(), threading.Lock()
    both_hold = threading.Barrier(2)
    threading.Thread(target=update_cache, args=(b, a, both_hold), name="cache-writer", daemon=True).start()
    update_cache(a, b, both_hold)


def finish() -> None:
    threading.Event().wait()  # an upload that never reports back


def main() -> None:
    reporter = traincard_otel.configure()  # first: it turns the flight recorder on for the group
    dist.init_process_group(os.environ.get("HANG_BACKEND", "gloo"))
    rank = dist.get_rank()
    if dist.get_backend() == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    for step in range(1, STEPS + 1):
        batch = fetch_batch(rank, step)
        if SCENARIO == "deadlock" and rank == CULPRIT and step == HANG_AT:
            deadlock()
        if not (SCENARIO == "skip" and rank == CULPRIT and step == HANG_AT):
            dist.all_reduce(batch)
        time.sleep(0.02)
        reporter.step_end(step, duration_s=0.02)
    if rank == CULPRIT:
        finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
