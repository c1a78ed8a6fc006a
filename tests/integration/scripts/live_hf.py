"""A tiny HF Trainer that trains until killed, saying ``ready`` after 5 steps (once its state is in
the store): ``traincard profile`` asks it for a capture through its store (the raw loop's is
``raw_loop.py``)."""

import os
import time

import torch

import traincard_otel

STEP_SLEEP_S = float(os.environ.get("LOOP_SLEEP", "0.02"))


def main() -> None:
    from transformers import Trainer, TrainerCallback

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    class Ready(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == 5:
                reporter = traincard_otel.active_reporter()
                assert reporter is not None
                reporter.flush()  # ready: its state, "running", is in the store
                print("ready", flush=True)
            time.sleep(STEP_SLEEP_S)

    args = training_args(
        os.environ.get("LIVE_OUTPUT", "out"),
        max_steps=100_000,
        per_device_train_batch_size=4,
        eval_strategy="no",
        save_strategy="no",
        logging_steps=10,
    )
    trainer = Trainer(
        model=tiny_gpt2(n_layer=1, n_embd=32),
        args=args,
        train_dataset=ProgressionDataset(256, seq_len=16),
        callbacks=[Ready()],
    )
    traincard_otel.instrument(trainer)
    trainer.train()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
