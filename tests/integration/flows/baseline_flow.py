"""A small flow whose step reports a loss curve, an eval loss and step times (baseline comparison
tests): ``--scale`` multiplies the loss, ``--step_s`` is the time per step."""

import os
import time

from metaflow import FlowSpec, Parameter, current, step, traincard

# @traincard(baseline=...) as a user writes it, chosen per run by the test through this variable.
BASELINE = os.environ.get("BASELINE_FLOW_ATTR") or None
STEPS = 300


class BaselineFlow(FlowSpec):
    scale = Parameter("scale", default=1.0)
    step_s = Parameter("step_s", default=0.01)

    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=1, flush_interval=0.3, baseline=BASELINE)
    @step
    def train(self):
        reporter = current.traincard
        reporter.progress(max_steps=STEPS, batch_size=8, world_size=1)
        with reporter.phase("train"):
            for s in range(1, STEPS + 1):
                reporter.metrics({"loss": self.scale / s**0.5}, step=s)
                reporter.step_end(s, duration_s=self.step_s, samples=8)
                if s % 60 == 0:
                    reporter.metrics({"eval_loss": 1.1 * self.scale / s**0.5}, step=s)
                time.sleep(self.step_s)
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    BaselineFlow()
