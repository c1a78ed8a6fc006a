"""A small flow whose step reports a loss curve, for runs on a cloud datastore (GCS, Azure)."""

import time

from metaflow import FlowSpec, current, step, traincard


class CloudFlow(FlowSpec):
    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=1, flush_interval=0.3)
    @step
    def train(self):
        reporter = current.traincard
        reporter.progress(max_steps=300, batch_size=8, world_size=1)
        with reporter.phase("train"):
            for s in range(1, 301):
                reporter.metrics({"loss": 1.0 / s}, step=s)
                reporter.step_end(s, duration_s=0.003, samples=8)
                time.sleep(0.003)
        self.steps = 300
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    CloudFlow()
