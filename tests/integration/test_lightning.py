"""Real Lightning Trainers (both namespaces) on a tiny model: what self.log reports is what is stored."""

from __future__ import annotations

import csv
import importlib
import statistics
from pathlib import Path

import pytest

import traincard_otel


def _module(pl):  # type: ignore[no-untyped-def]
    import torch

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=False)
            return loss

        def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), on_epoch=True)

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.05)

    return Regressor()


def _loader(seed: int):  # type: ignore[no-untyped-def]
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 4, generator=g)
    y = x.sum(dim=1, keepdim=True)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


@pytest.mark.slow
@pytest.mark.parametrize("namespace", ["lightning.pytorch", "pytorch_lightning"])
def test_lightning_metrics_checkpoints_and_phases(namespace: str, store_dir: Path, tmp_path: Path) -> None:
    pl = pytest.importorskip(namespace)
    csv_logger = importlib.import_module(f"{namespace}.loggers").CSVLogger(str(tmp_path / "csv"), name="run")
    ckpt = pl.callbacks.ModelCheckpoint(
        dirpath=str(tmp_path / "ckpt"), monitor="val_loss", mode="min", save_top_k=2
    )
    # Saved between two training steps, not at an epoch's end.
    every_5 = pl.callbacks.ModelCheckpoint(
        dirpath=str(tmp_path / "steps"), every_n_train_steps=5, save_top_k=-1, filename="{step}"
    )
    trainer = pl.Trainer(
        max_epochs=3,
        log_every_n_steps=1,
        accelerator="cpu",
        devices=1,
        logger=csv_logger,
        callbacks=[ckpt, every_5],
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    handle = traincard_otel.instrument(trainer)
    # Per-step hooks the callback does not use are switched off (Lightning skips non-callables).
    assert handle.callback.on_before_zero_grad is None and handle.callback.on_after_backward is None
    trainer.fit(_module(pl), _loader(0), _loader(1))
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    with open(Path(csv_logger.log_dir) / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    expected = [(int(r["step"]), float(r["train_loss"])) for r in rows if r.get("train_loss")]
    got = list(zip(run.metrics["train_loss"].steps, run.metrics["train_loss"].values, strict=True))
    assert [s for s, _ in got] == [s for s, _ in expected]
    assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-6)
    assert all(r["epoch"] for r in rows)  # the CSV logger is given what it was given untapped
    val = [float(r["val_loss"]) for r in rows if r.get("val_loss")]
    assert run.metrics["val_loss"].values == pytest.approx(val, rel=1e-6)

    saved = {c["path"]: c for c in run.checkpoints}
    kept = [p for p in saved if Path(p).exists()]  # save_top_k=2 deletes the worse ones later
    assert kept and all(Path(p).stat().st_size == saved[p]["size_bytes"] for p in kept)
    # A checkpoint deleted (top-k rotation) before the converter measured it has no size, never a wrong one.
    assert all(c["size_bytes"] is None or c["size_bytes"] > 0 for c in saved.values())
    by_step = sorted(str(p) for p in (tmp_path / "steps").glob("*.ckpt"))
    assert len(by_step) == 4 and set(by_step) <= set(saved)  # steps 5, 10, 15, 20
    assert all(c["metric"] == "val_loss" for p, c in saved.items() if p not in by_step)
    assert sum(c["best"] for c in saved.values()) >= 1
    names = [p["n"] for p in run.phases]
    assert names.count("training.eval") == 3 and "training.train" in names and "training.save" in names
    status = run.status
    assert status["status"] == "finished" and status["progress"]["max_steps"] == 24
    assert status["progress"]["batch_size"] == 8 and status["progress"]["epoch"] == 2
    assert run.step_times[0].steps == list(range(1, 25))  # saves within steps included
    # a save's time is the save phase's, in no step's time (those within steps 5, 10, 15, 20 too)
    saves = [(p["t0"], p["t1"]) for p in run.phases if p["n"] == "training.save"]
    steps = run.step_times[0]
    spans = [(t - d, t) for t, d in zip(steps.times, steps.values, strict=True)]
    assert len(saves) >= 4 and not [
        (s, p) for s in spans for p in saves if min(s[1], p[1]) - max(s[0], p[0]) > (p[1] - p[0]) / 2
    ]


def _fit_raising(exc: BaseException, escapes: type[BaseException]) -> None:
    """Fit a module whose fourth training step raises ``exc``; ``escapes`` is what Lightning lets out."""
    pl = pytest.importorskip("lightning.pytorch")
    module = _module(pl)
    original = module.training_step

    def raising(batch, batch_idx):  # type: ignore[no-untyped-def]
        if batch_idx == 3:
            raise exc
        return original(batch, batch_idx)

    module.training_step = raising  # type: ignore[method-assign]
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    traincard_otel.instrument(trainer)
    with pytest.raises(escapes):
        trainer.fit(module, _loader(0))
    traincard_otel.shutdown()


@pytest.mark.slow
def test_lightning_exception_is_recorded(store_dir: Path) -> None:
    _fit_raising(RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB"), RuntimeError)
    failure = traincard_otel.load(store_dir).status["failure"]
    assert failure["type"] == "RuntimeError" and failure["verdict"]["kind"] == "cuda_oom"


@pytest.mark.slow
def test_lightning_interrupted_ends_terminated_by_sigint(store_dir: Path) -> None:
    _fit_raising(KeyboardInterrupt(), SystemExit)  # Lightning shuts down gracefully, then exits with 1
    status = traincard_otel.load(store_dir).status
    assert status["status"] == "terminated" and status["terminated_by"] == "SIGINT"
    assert status.get("failure") is None


def _gpt2_module(pl):  # type: ignore[no-untyped-def]
    import torch

    from examples.tiny_gpt2 import tiny_gpt2

    class CausalLM(pl.LightningModule):
        """The tiny GPT-2 held as ``self.model``, as Lightning users wrap HF models."""

        def __init__(self, lr: float = 1e-3) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.model = tiny_gpt2()  # vocabulary 64, 64 positions, 2 layers of width 64

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            loss = self.model(**batch).loss
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)

    return CausalLM()


@pytest.mark.slow
def test_lightning_gpt2_reports_model_flops_tokens_and_mfu(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    pytest.importorskip("transformers")
    import torch

    from traincard_otel._analysis.analysis import analyse
    from traincard_otel._read.payload.insights import insights_section
    from traincard_otel._schema import Event

    from examples.tiny_gpt2 import ProgressionDataset

    monkeypatch.setenv("TRAINCARD_PEAK_FLOPS", "1e12")  # a CPU has no known peak: name one
    module = _gpt2_module(pl)
    # batches of 4 sequences of 32 tokens, two micro-batches a step: 12 optimizer steps
    data = torch.utils.data.DataLoader(ProgressionDataset(96), batch_size=4)
    trainer = pl.Trainer(
        max_steps=12,
        accumulate_grad_batches=2,
        log_every_n_steps=1,
        accelerator="cpu",
        devices=1,
        logger=False,  # no Lightning logger: the logged values still reach the card
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    traincard_otel.instrument(trainer)
    trainer.fit(module, data)
    traincard_otel.shutdown()
    # the module's hooks are its own again once the fit is over
    assert not {"on_train_batch_start", "on_train_batch_end"} & set(vars(module))

    run = traincard_otel.load(store_dir)
    # GPT-2 by hand, vocabulary V = 64, positions P = 64, width d = 64, L = 2 layers: embeddings
    # (V + P) d, per layer 12 d^2 + 13 d (attention 4 d^2 + 4 d, MLP 8 d^2 + 5 d, two layer norms
    # 4 d), the final layer norm 2 d; the output layer shares the input embedding.
    V, P, d, L = 64, 64, 64, 2
    params = (V + P) * d + L * (12 * d * d + 13 * d) + 2 * d
    assert params == sum(p.numel() for p in module.parameters()) == 108_288
    progress = run.status["progress"]
    assert progress["flops_per_token"] == 6 * params
    assert progress["attention_flops_per_position"] == 12 * L * d
    assert progress["compute_dtype"] in ("fp32", "tf32") and progress["peak_flops"] == 1e12
    assert progress["peak_source"] == "TRAINCARD_PEAK_FLOPS" and progress["batch_size"] == 8

    # one step end per optimizer step, each with both micro-batches' samples and tokens
    steps = run.step_times[0]
    assert steps.steps == list(range(1, 13))
    samples = run.throughput["samples_per_second{rank=0}"]
    tokens = run.throughput["tokens_per_second{rank=0}"]
    assert tokens.values == pytest.approx([32 * s for s in samples.values])
    assert samples.values == pytest.approx([8 / t for t in steps.values])

    e = insights_section(run, analyse(run))["efficiency"]
    assert e["seq_len"] == 32 and e["flops_per_token"] == 6 * params + 12 * L * d * 32
    rate = statistics.median(tokens.values[-50:])
    assert e["achieved_flops"] == pytest.approx(e["flops_per_token"] * rate)
    assert e["mfu"] == pytest.approx(e["flops_per_token"] * rate / 1e12) and e["mfu"] > 0

    # what self.log logged, once per optimizer step, and the hyperparameters, with no logger
    assert len(run.metrics["train_loss"]) == 12
    hyper = [ev["body"] for ev in run.events if ev["name"] == Event.HYPERPARAMS]
    assert hyper == [{"lr": "0.001"}]


@pytest.mark.slow
def test_lightning_manual_optimization_reports_each_optimizer_step(store_dir: Path) -> None:
    pl = pytest.importorskip("pytorch_lightning")
    import torch

    class Manual(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            if batch_idx % 2 == 0:  # every other batch only: a step end at each optimizer step
                return None
            opt = self.optimizers()
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
            self.log("loss", loss)
            return None

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = pl.Trainer(
        max_epochs=1,
        log_every_n_steps=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    traincard_otel.instrument(trainer)
    trainer.fit(Manual(), _loader(0))  # 8 batches of 8, 4 optimizer steps
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.step_times[0].steps == [1, 2, 3, 4]
    assert run.throughput["samples_per_second{rank=0}"].values == pytest.approx(
        [16 / t for t in run.step_times[0].values]
    )
    # Lightning hands its loggers the logged values at every batch in manual optimization
    assert run.metrics["loss"].steps == list(range(1, 8))


def _fit_briefly(pl, trainer) -> None:  # type: ignore[no-untyped-def]
    """Two epochs of the regressor (16 steps, an evaluation after each epoch)."""
    trainer.fit(_module(pl), _loader(0), _loader(1))
    traincard_otel.shutdown()


def _trainer(pl, tmp_path: Path, callbacks: list[object]):  # type: ignore[no-untyped-def]
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=str(tmp_path / "ckpt"), monitor="val_loss", save_top_k=1)
    return pl.Trainer(
        max_epochs=2,
        log_every_n_steps=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        callbacks=[*callbacks, ckpt],
        enable_progress_bar=False,
        enable_model_summary=False,
    )


def _reported_once(run) -> None:  # type: ignore[no-untyped-def]
    assert run.metrics["train_loss"].steps == list(range(16))  # logged before the step's end
    assert run.step_times[0].steps == list(range(1, 17))
    assert len(run.metrics["val_loss"].values) == 2
    assert [p["n"] for p in run.phases].count("training.train") == 1
    assert run.checkpoints and run.status["status"] == "finished"


@pytest.mark.slow
@pytest.mark.parametrize("namespace", ["lightning.pytorch", "pytorch_lightning"])
def test_lightning_callback_passed_to_the_trainer(namespace: str, store_dir: Path, tmp_path: Path) -> None:
    """One class for both namespaces: Lightning calls a callback's hooks by name."""
    pl = pytest.importorskip(namespace)
    from traincard_otel.integrations import LightningCallback

    callback = LightningCallback()
    trainer = _trainer(pl, tmp_path, [callback])
    _fit_briefly(pl, trainer)  # bound in setup(), at the start of the fit
    assert traincard_otel.instrument(trainer).callback is callback
    _reported_once(traincard_otel.load(store_dir))


@pytest.mark.slow
def test_autolog_instruments_a_lightning_trainer(autologging: None, store_dir: Path, tmp_path: Path) -> None:
    pl = pytest.importorskip("pytorch_lightning")
    from traincard_otel.adapters._registry import instrumented
    from traincard_otel.integrations import LightningCallback

    passed = LightningCallback()
    with_callback = _trainer(pl, tmp_path, [passed])  # autolog adopts the callback passed
    handle = instrumented(with_callback)
    assert handle is not None and handle.callback is passed
    assert [type(c) for c in with_callback.callbacks].count(type(passed)) == 1

    trainer = _trainer(pl, tmp_path, [])
    handle = instrumented(trainer)
    assert handle is not None and handle.callback in trainer.callbacks
    assert traincard_otel.instrument(trainer) is handle
    _fit_briefly(pl, trainer)
    _reported_once(traincard_otel.load(store_dir))
