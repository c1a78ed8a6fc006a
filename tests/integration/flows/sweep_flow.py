"""A hyperparameter sweep: a foreach over learning rates, one branch diverging (caught by @catch so
the join still runs), and a join step with its own @traincard card comparing the branches."""

import time

from metaflow import FlowSpec, Parameter, catch, current, step, traincard

STEPS = 60


class SweepFlow(FlowSpec):
    model = Parameter("model", default="tiny")

    @step
    def start(self):
        self.lr = [0.1, 0.3, 3.0]
        self.next(self.train, foreach="lr")

    @catch(var="error")
    @traincard(refresh_interval=0.5, flush_interval=0.2)
    @step
    def train(self):
        reporter = current.traincard
        reporter.hyperparameters({"warmup": 5})
        reporter.progress(max_steps=STEPS, batch_size=8, world_size=1)
        with reporter.phase("train"):
            for s in range(1, STEPS + 1):
                reporter.metrics(
                    {"loss": 2.0 / (1 + self.input * s), "eval_accuracy": min(1.0, self.input * s / 50)},
                    step=s,
                )
                reporter.step_end(s, duration_s=0.03, samples=8)
                if self.input > 1 and s == 40:
                    raise RuntimeError("loss diverged")
                time.sleep(0.03)
        self.next(self.join)

    @traincard
    @step
    def join(self, inputs):
        self.next(self.end)

    @step
    def end(self):
        pass


if __name__ == "__main__":
    SweepFlow()
