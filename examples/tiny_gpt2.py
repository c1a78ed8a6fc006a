"""A tiny GPT-2 built from a config and a synthetic next-token task: no downloads, CPU-friendly.

The data are short sequences of an arithmetic progression modulo the vocabulary, so the loss
really falls within a few hundred steps.
"""

from __future__ import annotations

from typing import Any


def tiny_gpt2(
    vocab: int = 64, n_layer: int = 2, n_embd: int = 64, n_head: int = 2, n_positions: int = 64
) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config)


class ProgressionDataset:
    """``n`` sequences ``start, start+d, start+2d, ...`` (mod ``vocab``), as causal-LM examples."""

    def __init__(self, n: int, seq_len: int = 32, vocab: int = 64, seed: int = 0) -> None:
        import torch

        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, vocab, (n, 1), generator=g)
        delta = torch.randint(1, 5, (n, 1), generator=g)
        self.ids = (start + delta * torch.arange(seq_len)) % vocab

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": ids.new_ones(ids.shape), "labels": ids.clone()}


def training_args(output_dir: str, **overrides: Any) -> Any:
    from transformers import TrainingArguments

    args: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        learning_rate=3e-3,
        lr_scheduler_type="cosine",
        warmup_steps=10,
        max_steps=200,
        logging_steps=5,
        eval_strategy="steps",
        eval_steps=50,
        save_strategy="steps",
        save_steps=100,
        save_total_limit=3,
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        report_to="none",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    args.update(overrides)
    return TrainingArguments(**args)


def trainer(output_dir: str, max_steps: int = 200, **overrides: Any) -> Any:
    from transformers import Trainer

    return Trainer(
        model=tiny_gpt2(),
        args=training_args(output_dir, max_steps=max_steps, **overrides),
        train_dataset=ProgressionDataset(2048),
        eval_dataset=ProgressionDataset(128, seed=1),
    )


def fitted_weights(steps: int, seed: int = 0) -> bytes:
    """A tiny GPT-2 fitted briefly to the progression task (plain PyTorch), as ``torch.save`` bytes:
    a model for the evaluation and inference examples to load."""
    import io

    import torch

    torch.manual_seed(seed)
    model, data = tiny_gpt2(), ProgressionDataset(2048)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        ids = data.ids[torch.randint(0, len(data), (16,))]
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def from_weights(weights: bytes) -> Any:
    """The tiny GPT-2 of :func:`fitted_weights`' bytes, in eval mode."""
    import io

    import torch

    model = tiny_gpt2()
    model.load_state_dict(torch.load(io.BytesIO(weights)))
    return model.eval()
