"""Evaluate a tiny GPT-2 (built from a config) on a synthetic set in a Metaflow step, with the live card.

The same telemetry as training, for a loop that is not training: an ``eval`` phase, the running
loss and next-token accuracy, and per item its latency (items/s, latency percentiles) and
whether it failed (error count and rate).

python examples/eval_flow.py run                      # --items 2000 --corrupt_every 50
python examples/eval_flow.py card view evaluate       # after the run
"""

import os
import sys
import time

from metaflow import FlowSpec, Parameter, current, step, traincard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class EvalFlow(FlowSpec):
    items = Parameter("items", default=512, help="sequences to evaluate")
    fit_steps = Parameter("fit_steps", default=150, help="steps of the short fit before")
    report_every = Parameter("report_every", default=32, help="items between reported figures")
    corrupt_every = Parameter(
        "corrupt_every", default=0, help="make every Nth item unreadable (see the errors)"
    )

    @step
    def start(self):
        self.next(self.fit)

    @step
    def fit(self):
        """A model to evaluate: a short plain-PyTorch fit to the synthetic task."""
        from tiny_gpt2 import fitted_weights

        self.weights = fitted_weights(int(self.fit_steps))
        self.next(self.evaluate)

    @traincard(refresh_interval=2)
    @step
    def evaluate(self):
        import torch
        from tiny_gpt2 import ProgressionDataset, from_weights

        torch.manual_seed(0)
        reporter = current.traincard
        model = from_weights(self.weights)
        data = ProgressionDataset(int(self.items), seed=1)
        every, corrupt = int(self.report_every), int(self.corrupt_every)
        reporter.progress(max_steps=int(self.items))
        meter = reporter.meter("eval", every=every)  # items/s, latency percentiles, errors
        loss_sum = correct = predicted = 0.0
        scored = 0
        with reporter.phase("eval"), torch.no_grad():
            for i in range(int(self.items)):
                t0 = time.perf_counter()
                try:
                    ids = data[i]["input_ids"][None]
                    if corrupt and (i + 1) % corrupt == 0:
                        ids = ids + 10_000  # token ids outside the vocabulary: the model refuses them
                    out = model(input_ids=ids, labels=ids)
                    guess = out.logits[:, :-1].argmax(-1)
                    correct += float((guess == ids[:, 1:]).sum())
                    predicted += guess.numel()
                    loss_sum += float(out.loss)
                    scored += 1
                    meter.item(time.perf_counter() - t0)
                except (IndexError, RuntimeError) as exc:
                    meter.item(time.perf_counter() - t0, error=exc)
                    reporter.log(f"item {i} failed: {type(exc).__name__}: {exc}", level="WARNING")
                if (i + 1) % every == 0 and scored:
                    reporter.metrics(
                        {"loss": loss_sum / scored, "accuracy": correct / predicted}, step=i + 1, phase="eval"
                    )
        self.summary = meter.close()
        self.summary.update(loss=loss_sum / max(scored, 1), accuracy=correct / max(predicted, 1))
        self.next(self.end)

    @step
    def end(self):
        s = self.summary
        print(
            f"evaluated {s['items']:.0f} items: loss {s['loss']:.3f}, accuracy {s['accuracy']:.3f}, "
            f"{s['items_per_s']:.0f} items/s, p50 {s['latency_p50_s'] * 1000:.1f} ms, "
            f"{s['errors']:.0f} errors"
        )


if __name__ == "__main__":
    EvalFlow()
