"""A @parallel gang of 2 nodes, each starting torchrun with 2 gloo ranks (4 ranks in all).

Each node's step starts ``python -m traincard_otel.torchrun`` (``torch.distributed.run`` that
keeps the elastic agent's record of how each rank ended) itself: metaflow-torchrun 0.2.2 fails
locally with Metaflow 2.19. GANG_MODE (healthy | kill | hang) is read by the training script.
GANG_LAUNCHER=plain starts plain ``python -m torch.distributed.run`` instead (no agent record: the
card reads torchrun's failure report from the step's captured console).
"""

import os
import subprocess
import sys

from metaflow import FlowSpec, current, parallel, step, traincard

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gang_train.py")


class GangFlow(FlowSpec):
    @step
    def start(self):
        self.next(self.train, num_parallel=2)

    # GANG_REFRESH_INTERVAL: the S3 variant refreshes rarely (an argument beats TRAINCARD_* variables)
    @traincard(refresh_interval=float(os.environ.get("GANG_REFRESH_INTERVAL", "1")), flush_interval=0.5)
    @parallel
    @step
    def train(self):
        node = current.parallel.node_index
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run"
            if os.environ.get("GANG_LAUNCHER") == "plain"
            else "traincard_otel.torchrun",
            "--nnodes",
            str(current.parallel.num_nodes),
            "--node_rank",
            str(node),
            "--nproc_per_node",
            "2",
            "--master_addr",
            current.parallel.main_ip,
            "--master_port",
            os.environ.get("GANG_MASTER_PORT", "29533"),
            "--max_restarts",
            "0",
            "--monitor_interval",
            "0.5",
            SCRIPT,
        ]
        self.torchrun_exit = subprocess.run(cmd).returncode
        if self.torchrun_exit != 0:
            raise RuntimeError(f"torchrun on node {node} exited with {self.torchrun_exit}")
        self.next(self.join)

    @step
    def join(self, inputs):
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    GangFlow()
