"""A live job that trains until killed: a raw loop (``LIVE_KIND=raw``, the default; run it under
torchrun for a DDP gang) or a tiny HF Trainer (``LIVE_KIND=hf``). Prints ``ready`` once it has
trained a few steps; ``traincard profile`` then asks it for a capture through its store."""

import os
import sys
import time

import torch

import traincard_otel

KIND = os.environ.get("LIVE_KIND", "raw")
STEP_SLEEP_S = float(os.environ.get("LIVE_STEP_SLEEP", "0.02"))


def raw() -> None:
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    model = torch.nn.parallel.DistributedDataParallel(net) if distributed else net
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(opt, model=model)
    step = 0
    while True:
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=x)  # type: ignore[attr-defined]
        step += 1
        if step == 5:
            print("ready", flush=True)
        time.sleep(STEP_SLEEP_S)


def hf() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
    from tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args
    from transformers import Trainer, TrainerCallback

    class Ready(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == 5:
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
    hf() if KIND == "hf" else raw()
