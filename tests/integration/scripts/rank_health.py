"""A rank of a multi-process job: heart-beats through step ends; one rank dies or hangs on request.

RANK_HEALTH_MODE=kill|hang RANK_HEALTH_VICTIM=2 torchrun --nproc_per_node=3 rank_health.py
"""

import os
import signal
import time

import traincard_otel

STEPS = int(os.environ.get("RANK_HEALTH_STEPS", "300"))
MODE = os.environ.get("RANK_HEALTH_MODE", "none")
VICTIM = int(os.environ.get("RANK_HEALTH_VICTIM", "2"))
rank = int(os.environ.get("RANK", "0"))

reporter = traincard_otel.configure()
for step in range(1, STEPS + 1):
    time.sleep(0.05)
    reporter.metrics({"loss": 1.0 / step}, step=step)
    reporter.step_end(step, duration_s=0.05)
    if rank == VICTIM and step == 20:
        reporter.flush()
        if MODE == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif MODE == "hang":
            time.sleep(3600)  # alive, heart-beat stopped: like a rank stuck in a collective
print(f"rank {rank} done", flush=True)
