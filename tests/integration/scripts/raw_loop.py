"""A raw loop instrumented with its model (``tests/support/loops.py``), alone or as one rank of a
torchrun gang (DDP on gloo). ``LOOP_STEPS`` steps (0: until killed, saying ``ready`` after 5, once
its state is in the store), each followed by ``LOOP_SLEEP`` seconds; ``SLOW_RANK``'s forward is
planted ``SLOW_S`` slower."""

import os
import time

import torch

import traincard_otel

from tests.support.loops import mlp, train

STEPS = int(os.environ.get("LOOP_STEPS", "0"))
SLEEP_S = float(os.environ.get("LOOP_SLEEP", "0.02"))
SLOW_RANK = int(os.environ.get("SLOW_RANK", "-1"))
SLOW_S = float(os.environ.get("SLOW_S", "0.08"))


def main() -> None:
    torch.set_num_threads(1)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    rank = int(os.environ.get("RANK", "0"))
    net = mlp()
    if rank == SLOW_RANK:
        net[0].register_forward_hook(lambda module, args, output: time.sleep(SLOW_S))
    model = torch.nn.parallel.DistributedDataParallel(net) if distributed else net
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(opt, model=model)
    if STEPS:
        train(tracker, model, opt, STEPS)
    else:
        train(tracker, model, opt, 5, sleep_s=SLEEP_S)
        tracker.reporter.flush()  # ready: its state, "running", is in the store
        print("ready", flush=True)
        parent = os.getppid()
        while os.getppid() == parent:  # until killed, or orphaned (a launcher killed with SIGKILL)
            train(tracker, model, opt, 100, sleep_s=SLEEP_S)
        os._exit(1)  # orphaned: the other ranks are gone, a barrier would wait for ever
    if distributed:
        dist.barrier()
    traincard_otel.shutdown()
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
