"""A flow whose training step fails in a chosen way on its first attempt(s) (for failure tests)."""

import os
import signal
import sys
import time

from metaflow import FlowSpec, Parameter, current, step, traincard

if "card" in sys.argv and "SLOW_CARD_SECONDS" in os.environ:
    # Metaflow's card subprocesses run this file: make them as slow as on a busy machine or a
    # remote datastore, where they take seconds.
    time.sleep(float(os.environ["SLOW_CARD_SECONDS"]))


class FailureFlow(FlowSpec):
    mode = Parameter("mode", default="raise", help="raise | sigkill | sigterm | none")
    fail_attempts = Parameter("fail_attempts", default=1)
    steps = Parameter("steps", default=40)
    fail_at = Parameter("fail_at", default=25)
    step_sleep = Parameter("step_sleep", default=0.01)

    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=1, flush_interval=0.5)
    @step
    def train(self):
        import torch

        reporter = current.traincard
        attempt = current.retry_count
        failing = attempt < int(self.fail_attempts) and self.mode != "none"
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, y = torch.randn(256, 8), torch.randn(256, 1)
        reporter.progress(max_steps=int(self.steps), batch_size=32, world_size=1)
        start = 1 if attempt == 0 else int(self.fail_at) - 10  # resume from an earlier checkpoint
        with reporter.phase("train"):
            for s in range(start, int(self.steps) + 1):
                t0 = time.perf_counter()
                loss = torch.nn.functional.mse_loss(model(x[:32]), y[:32])
                opt.zero_grad()
                loss.backward()
                opt.step()
                time.sleep(float(self.step_sleep))
                reporter.metrics({"loss": float(loss), "attempt": float(attempt)}, step=s)
                reporter.step_end(s, duration_s=time.perf_counter() - t0, samples=32)
                if failing and s == int(self.fail_at):
                    reporter.flush()
                    time.sleep(1.0)  # let the state reach the store before dying
                    if self.mode == "raise":
                        raise RuntimeError(f"synthetic failure at step {s} on attempt {attempt}")
                    if self.mode == "sigkill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    if self.mode == "sigterm":
                        os.kill(os.getpid(), signal.SIGTERM)
                        time.sleep(30)
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    FailureFlow()
