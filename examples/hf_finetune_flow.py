"""Fine-tune a tiny GPT-2 with the Hugging Face Trainer in a Metaflow step, with the live card.

`@traincard` is the whole integration: every Trainer made in the step is reported.

python examples/hf_finetune_flow.py run                 # --device cuda on a GPU machine
python examples/hf_finetune_flow.py card server      # live, while it runs
python examples/hf_finetune_flow.py card view train  # after the run
"""

import os
import sys

from metaflow import FlowSpec, Parameter, current, step, traincard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class FinetuneFlow(FlowSpec):
    max_steps = Parameter("max_steps", default=1200, help="optimizer steps")
    fail_at = Parameter("fail_at", default=0, help="raise at this step (to see the failure card)")
    device = Parameter("device", default="cpu", help="cpu, or cuda to train on the GPU")

    @step
    def start(self):
        self.next(self.train)

    @traincard(refresh_interval=2)
    @step
    def train(self):
        import tempfile

        from tiny_gpt2 import trainer as make_trainer

        out = os.path.join(tempfile.gettempdir(), f"traincard-example-{current.run_id}")
        trainer = make_trainer(out, max_steps=int(self.max_steps), use_cpu=self.device == "cpu")
        if int(self.fail_at):
            from transformers import TrainerCallback

            fail_at = int(self.fail_at)

            class Boom(TrainerCallback):
                def on_step_end(self, args, state, control, **kw):
                    if state.global_step >= fail_at:
                        raise RuntimeError(f"synthetic failure at step {state.global_step}")

            trainer.add_callback(Boom())
        trainer.train()
        self.log_history = trainer.state.log_history
        self.next(self.end)

    @step
    def end(self):
        losses = [h["loss"] for h in self.log_history if "loss" in h]
        print(f"trained: first loss {losses[0]:.3f}, last loss {losses[-1]:.3f}")


if __name__ == "__main__":
    FinetuneFlow()
