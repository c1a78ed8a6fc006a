"""PEFT/LoRA-wrapped and TRL trainers are Trainers: instrument() and autolog() report them the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

import traincard_otel


@pytest.mark.slow
def test_peft_lora_model_under_the_trainer(store_dir: Path, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    from transformers import Trainer

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    model = peft.get_peft_model(
        tiny_gpt2(), peft.LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True)
    )
    trainer = Trainer(
        model=model,
        args=training_args(
            str(tmp_path / "out"), max_steps=12, logging_steps=2, eval_strategy="no", save_steps=12
        ),
        train_dataset=ProgressionDataset(256),
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    expected = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert run.metrics["loss"].values == expected
    assert run.checkpoints[-1]["step"] == 12 and run.checkpoints[-1]["size_bytes"] > 0


@pytest.mark.slow
def test_trl_sft_trainer_under_autolog(autologging: None, store_dir: Path, tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from examples.tiny_gpt2 import tiny_gpt2

    vocab = {ch: i for i, ch in enumerate(["<pad>", "<unk>", *"abcdefghijklmnopqrstuvwxyz "])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<pad>"
    )
    texts = [("abc " * 8)[i % 4 :] for i in range(64)]
    config = trl.SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=8,
        logging_steps=2,
        per_device_train_batch_size=8,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        max_length=32,
    )
    trainer = trl.SFTTrainer(  # instrumented by autolog() as it is made
        model=tiny_gpt2(vocab=len(vocab)),
        args=config,
        processing_class=tokenizer,
        train_dataset=datasets.Dataset.from_dict({"text": texts}),
    )
    trainer.train()
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    expected = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert expected and run.metrics["loss"].values == expected
    assert run.status["status"] == "finished" and run.step_times[0].steps == list(range(1, 9))
