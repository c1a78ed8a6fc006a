"""One rank of an HF Trainer run under plain ``python -m torch.distributed.run`` (gloo, CPU):
a tiny GPT-2 trained as the Trainer trains it, instrumented in one line."""

import os

import traincard_otel

from examples.tiny_gpt2 import trainer


def main() -> None:
    out = os.environ["HF_OUTPUT_DIR"]
    hf = trainer(
        out,
        max_steps=12,
        per_device_train_batch_size=4,
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
        load_best_model_at_end=False,
        metric_for_best_model=None,
        ddp_backend="gloo",
    )
    traincard_otel.instrument(hf)
    hf.train()
    traincard_otel.shutdown()


if __name__ == "__main__":
    main()
