"""Batch generation with a tiny GPT-2 (built from a config) in a Metaflow step, with the live card.

The same telemetry as training, for a batch-inference loop: an ``infer`` phase and per prompt its
latency, generated tokens and time to first token (items/s, tokens/s, latency and TTFT
percentiles), and the prompts that failed (error count and rate).

python examples/inference_flow.py run                 # --prompts 1000 --new_tokens 32
python examples/inference_flow.py card view generate  # after the run
"""

import os
import sys
import time

from metaflow import FlowSpec, Parameter, current, step, traincard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class InferenceFlow(FlowSpec):
    prompts = Parameter("prompts", default=256, help="prompts to complete")
    new_tokens = Parameter("new_tokens", default=16, help="tokens generated per prompt")
    fit_steps = Parameter("fit_steps", default=150, help="steps of the short fit before")
    report_every = Parameter("report_every", default=32, help="prompts between reported figures")
    too_long_every = Parameter(
        "too_long_every",
        default=0,
        help="make every Nth prompt longer than the model's context (see the errors)",
    )

    @step
    def start(self):
        self.next(self.fit)

    @step
    def fit(self):
        """A model to serve: a short plain-PyTorch fit to the synthetic task."""
        from tiny_gpt2 import fitted_weights

        self.weights = fitted_weights(int(self.fit_steps))
        self.next(self.generate)

    @traincard(refresh_interval=2)
    @step
    def generate(self):
        import torch
        from tiny_gpt2 import ProgressionDataset, from_weights

        torch.manual_seed(0)
        reporter = current.traincard
        model = from_weights(self.weights)
        context = model.config.n_positions
        prompts = ProgressionDataset(int(self.prompts), seq_len=8, seed=2)
        long_prompt = ProgressionDataset(1, seq_len=context + 8, seed=3)[0]["input_ids"]
        new_tokens, long_every = int(self.new_tokens), int(self.too_long_every)
        reporter.progress(max_steps=int(self.prompts))
        meter = reporter.meter("infer", every=int(self.report_every))  # + tokens/s, TTFT
        self.completions = []
        with reporter.phase("infer"), torch.no_grad():
            for i in range(int(self.prompts)):
                t0 = time.perf_counter()
                ids = prompts[i]["input_ids"]
                if long_every and (i + 1) % long_every == 0:
                    ids = long_prompt
                try:
                    if ids.shape[0] + new_tokens > context:
                        raise ValueError(
                            f"prompt of {ids.shape[0]} tokens + {new_tokens} exceeds the context of {context}"
                        )
                    out = model(input_ids=ids[None], use_cache=True)  # prefill
                    token = out.logits[0, -1].argmax()
                    ttft = time.perf_counter() - t0
                    generated = [int(token)]
                    for _ in range(new_tokens - 1):  # greedy decoding with the KV cache
                        out = model(
                            input_ids=token.view(1, 1), past_key_values=out.past_key_values, use_cache=True
                        )
                        token = out.logits[0, -1].argmax()
                        generated.append(int(token))
                    meter.item(time.perf_counter() - t0, tokens=len(generated), ttft_s=ttft)
                    if i < 4:
                        self.completions.append((ids.tolist(), generated))
                except (ValueError, IndexError, RuntimeError) as exc:
                    meter.item(time.perf_counter() - t0, error=exc)
                    reporter.log(f"prompt {i} failed: {type(exc).__name__}: {exc}", level="WARNING")
        self.summary = meter.close()
        self.next(self.end)

    @step
    def end(self):
        s = self.summary
        print(
            f"completed {s['items'] - s['errors']:.0f} of {s['items']:.0f} prompts: "
            f"{s['tokens_per_s']:.0f} tokens/s, "
            f"TTFT p50 {s['ttft_p50_s'] * 1000:.1f} ms, latency p90 {s['latency_p90_s'] * 1000:.1f} ms"
        )


if __name__ == "__main__":
    InferenceFlow()
