"""End to end: a Hugging Face Trainer on a tiny GPT-2 (CPU), a Lightning module and a raw loop,
logging every step, with and without traincard (system telemetry and the store on), in fresh
processes interleaved ABBA.

    python -m benchmarks.bench_end_to_end [--steps 400] [--rounds 3] [--no-peers] [--quick] [--json F]

When installed (``pip install -e '.[bench]'``), the same runs are made with TensorBoard, wandb
(offline) and MLflow (its default SQLite store) in place of traincard, each wired the way its
framework integration does it (``report_to=``, a Lightning logger, direct calls in the raw loop).

Each child times its own optimizer steps (median of step intervals after a warm-up), so process
start-up and model construction are not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from benchmarks._harness import report, spread

REPO = Path(__file__).resolve().parent.parent
# Peer tracker -> the module that must be importable for it.
PEERS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def installed_peers() -> list[str]:
    return [peer for peer, module in PEERS.items() if find_spec(module) is not None]


def peer_environment(tmp: str) -> dict[str, str]:
    """Local, offline settings for the peers: nothing leaves the machine."""
    return {
        "WANDB_MODE": "offline",
        "WANDB_DIR": tmp,
        "WANDB_SILENT": "true",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db",
    }


def child_environment(run_dir: str) -> dict[str, str]:
    """A benchmark child's environment: its own store, this checkout importable, peers offline."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, TRAINCARD_DIR=run_dir, PYTHONPATH=path, **peer_environment(run_dir))


def raw_loop_logger(mode: str, tmp: str) -> Callable[[int, float], object] | None:
    """What a hand-written loop calls each step to record its loss with a peer tracker."""
    if mode == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=f"{tmp}/tb")
        return lambda step, loss: writer.add_scalar("loss", loss, step)
    if mode == "wandb":
        import wandb

        run = wandb.init(project="bench")
        return lambda step, loss: run.log({"loss": loss}, step=step)
    if mode == "mlflow":
        import mlflow

        mlflow.start_run()
        return lambda step, loss: mlflow.log_metrics({"loss": loss}, step=step)
    return None


def lightning_logger(mode: str, tmp: str) -> Any:
    if mode == "tensorboard":
        from lightning.pytorch.loggers import TensorBoardLogger

        return TensorBoardLogger(save_dir=tmp)
    if mode == "wandb":
        from lightning.pytorch.loggers import WandbLogger

        return WandbLogger(project="bench", save_dir=tmp, offline=True)
    if mode == "mlflow":
        from lightning.pytorch.loggers import MLFlowLogger

        return MLFlowLogger(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    return False


def hf_trainer(mode: str, out: str, steps: int, callbacks: list[Any], device: str = "cpu") -> Any:
    """A Trainer on a tiny GPT-2 logging every step, reporting to ``mode`` if it is a peer."""
    sys.path.insert(0, str(REPO / "examples"))
    from tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args
    from transformers import Trainer

    args = training_args(
        out,
        max_steps=steps,
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
        per_device_train_batch_size=4,
        warmup_steps=0,
        report_to=[mode] if mode in PEERS else "none",
        use_cpu=device == "cpu",
    )
    return Trainer(
        model=tiny_gpt2(n_layer=1, n_embd=32),
        args=args,
        train_dataset=ProgressionDataset(512),
        callbacks=callbacks,
    )


def raw_model(device: str = "cpu") -> Any:
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1))
    return net.to(device)


def raw_step(model: Any, opt: Any, device: str = "cpu") -> tuple[Any, Any]:
    """One optimizer step of the raw loop; returns the loss and the batch."""
    import torch

    x = torch.randn(128, 256, device=device)
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss, x


def lightning_fit(
    mode: str,
    steps: int,
    on_batch: Callable[[Any], None],
    setup: Callable[[Any], None],
    device: str = "cpu",
) -> None:
    """Fit a small Lightning module for ``steps`` steps, logging every step to ``mode``'s logger.

    ``on_batch(trainer)`` runs at the start of every training step; ``setup(trainer)`` before fit.
    """
    import lightning.pytorch as pl
    import torch

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = raw_model()

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            on_batch(self.trainer)
            (x,) = batch
            loss = torch.nn.functional.mse_loss(self.net(x), x.sum(1, keepdim=True))
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(128 * steps, 256)), batch_size=128
    )
    trainer = pl.Trainer(
        max_steps=steps,
        log_every_n_steps=1,
        accelerator="cpu" if device == "cpu" else "gpu",
        logger=lightning_logger(mode, os.environ["TRAINCARD_DIR"]),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    setup(trainer)
    trainer.fit(Module(), data)


def _print_median(times: list[float]) -> None:
    warm = times[len(times) // 5 :]
    print(json.dumps({"median_step_s": statistics.median(warm), "steps": len(warm)}))


def child(mode: str, steps: int) -> None:
    import torch
    from transformers import TrainerCallback

    torch.set_num_threads(1)
    times: list[float] = []

    class Clock(TrainerCallback):
        last = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            if self.last is not None:
                times.append(now - self.last)
            self.last = now

    with tempfile.TemporaryDirectory() as out:
        trainer = hf_trainer(mode, out, steps, [Clock()])
        if mode == "traincard":
            import traincard_otel

            traincard_otel.instrument(trainer)
        trainer.train()
    _print_median(times)


def child_raw(mode: str, steps: int) -> None:
    """A hand-written loop; instrumented through the optimizer hooks and tracker.log()."""
    import torch

    torch.set_num_threads(1)
    model = raw_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = None
    if mode == "traincard":
        import traincard_otel

        tracker = traincard_otel.instrument(opt)
    peer = raw_loop_logger(mode, os.environ["TRAINCARD_DIR"])
    times, last = [], time.perf_counter()
    for step in range(steps):
        loss, x = raw_step(model, opt)
        if tracker is not None:
            tracker.log(loss=loss.detach(), batch=x)  # type: ignore[attr-defined]
        if peer is not None:
            peer(step, loss.item())
        now = time.perf_counter()
        times.append(now - last)
        last = now
    _print_median(times)


def child_lightning(mode: str, steps: int) -> None:
    import torch

    torch.set_num_threads(1)
    times: list[float] = []
    last: list[float] = []

    def tick(_trainer: Any) -> None:
        now = time.perf_counter()
        if last:
            times.append(now - last[0])
        last[:] = [now]

    def setup(trainer: Any) -> None:
        if mode == "traincard":
            import traincard_otel

            traincard_otel.instrument(trainer)

    lightning_fit(mode, steps, tick, setup)
    _print_median(times)


CHILDREN = {"hf": child, "raw": child_raw, "lightning": child_lightning}


def _run(mode: str, steps: int, tmp: str, framework: str) -> float:
    run_dir = f"{tmp}/{mode}-{time.monotonic_ns()}"
    os.makedirs(run_dir)
    env = child_environment(run_dir)
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_end_to_end",
        "--child",
        mode,
        "--steps",
        str(steps),
        "--framework",
        framework,
    ]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return float(json.loads(out.stdout.strip().splitlines()[-1])["median_step_s"])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Interleaved plain/instrumented runs per framework; prints median step times and the overhead."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--framework", choices=sorted(CHILDREN), nargs="*", default=["hf", "lightning", "raw"]
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-peers", action="store_true", help="skip TensorBoard, wandb and MLflow")
    parser.add_argument("--child", choices=["plain", "traincard", *PEERS], default=None)
    args = parser.parse_args(argv)
    if args.child:
        CHILDREN[args.framework[0]](args.child, args.steps)
        return {}
    steps, rounds = (30, 1) if args.quick else (args.steps, args.rounds)
    frameworks = ["raw"] if args.quick else args.framework
    modes = ["plain", "traincard", *([] if args.no_peers else installed_peers())]
    rows, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for fw in frameworks:
            results: dict[str, list[float]] = {mode: [] for mode in modes}
            for r in range(rounds):
                for mode in modes if r % 2 == 0 else reversed(modes):
                    for _ in range(1 if args.quick else 2):  # ABBA inside each round as well
                        results[mode].append(_run(mode, steps, tmp, fw))
            raw[fw] = results
            plain = spread(results["plain"])
            for mode in modes[1:]:
                s = spread(results[mode])
                rows.append(
                    {
                        "framework": fw,
                        "tracker": mode,
                        "plain_ms": plain["median"] * 1e3,
                        "tracked_ms": s["median"] * 1e3,
                        "iqr_ms": (s["p75"] - s["p25"]) * 1e3,
                        "runs": s["n"],
                        "overhead_pct": (s["median"] / plain["median"] - 1) * 100,
                    }
                )
    return report(
        "end_to_end",
        rows,
        ["framework", "tracker", "plain_ms", "tracked_ms", "iqr_ms", "runs", "overhead_pct"],
        args.json,
        steps=steps,
        rounds=rounds,
        raw=raw,
    )


if __name__ == "__main__":
    main()
