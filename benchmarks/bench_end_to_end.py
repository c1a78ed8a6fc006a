"""End to end: whole training runs with and without the tracker, interleaved in child processes.

    python -m benchmarks.bench_end_to_end [--steps 300] [--pairs 10] [--processes 1]
                                          [--framework hf lightning raw] [--no-peers] [--control]
                                          [--quick] [--json F]
    python -m benchmarks.bench_end_to_end --pool RUN.json [RUN.json ...] [--json F]

Frameworks: a Hugging Face Trainer on a tiny GPT-2 (CPU), a Lightning module and a raw loop,
logging every step. A child process per framework and tracker trains run after run, each with a
freshly built trainer and model: "plain" runs with no tracker, "tracked" runs with one, in ABBA
order (after one unpaired warm-up run of each). A tracked traincard run is what a user's run
is: ``instrument()`` sets up the whole pipeline (system sampler, flush schedule, store writer, OTel
providers), training runs, then the handle is closed and the pipeline shut down. So everything
traincard does while training runs, on any thread, falls inside tracked runs, and nothing of it
in plain runs. When installed (``pip install -e '.[bench]'``), TensorBoard, wandb (offline) and
MLflow (its default SQLite store) take traincard's place, each wired the way its framework
integration does it (``report_to=``, a Lightning logger, direct calls in the raw loop).
``--control`` adds the tracker "none": its "tracked" runs are plain runs too, so its row shows
what the harness reads when nothing differs.

The two runs of a pair share a process and follow each other within seconds; still, adjacent
runs on a shared 2-vCPU machine differ by a few percent in how fast the same work runs, and a
process can favour one side throughout (memory layout, thread placement). ``--processes`` shares
the pairs among that many child processes, trackers taking turns process by process; the 95 %
interval is a bootstrap that resamples processes, then pairs within them, so it widens by as much
as processes disagree, and the table gives the range of the per-process medians.

Each run is timed from its ``--skip``-th step to its last. The overhead is the median over pairs
of ``tracked / plain - 1`` in mean step time, with its quartiles. Three figures per step are
medians of the tracked-minus-plain differences: ``wait_us``, the wall time the training thread
was not running (the GIL held by another thread, or its core taken), which is what the tracker's
threads cost it; ``thread_us``, the training thread's own CPU time, which the tracker's hooks add
to (``bench_step_overhead --block 2`` measures that part precisely); and ``other_cpu_us``, the CPU
time of the process's other threads. Set-up and shut-down (building the trainer, ``instrument()``,
the final flush) are not step time and are not timed; a user pays them once per run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks._harness import median_interval, report, settler, spread

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


class PeerLog(NamedTuple):
    """A peer tracker as a hand-written loop uses it: ``log(step, loss)`` each step, ``close()``."""

    log: Callable[[int, float], object]
    close: Callable[[], object]


def raw_loop_logger(mode: str, tmp: str) -> PeerLog | None:
    """What a hand-written loop calls each step to record its loss with a peer tracker."""
    if mode == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=f"{tmp}/tb")
        return PeerLog(lambda step, loss: writer.add_scalar("loss", loss, step), writer.close)
    if mode == "wandb":
        import wandb

        run = wandb.init(project="bench")
        return PeerLog(lambda step, loss: run.log({"loss": loss}, step=step), run.finish)
    if mode == "mlflow":
        import mlflow

        mlflow.start_run()
        return PeerLog(lambda step, loss: mlflow.log_metrics({"loss": loss}, step=step), mlflow.end_run)
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


def hf_trainer(
    mode: str, out: str, steps: int, callbacks: list[Any], device: str = "cpu", batch: int = 4
) -> Any:
    """A Trainer on a tiny GPT-2 logging every step, reporting to ``mode`` if it is a peer."""
    from transformers import Trainer

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    args = training_args(
        out,
        max_steps=steps,
        logging_steps=1,
        eval_strategy="no",
        save_strategy="no",
        per_device_train_batch_size=batch,
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


def raw_step(model: Any, opt: Any, device: str = "cpu", batch: int = 128) -> tuple[Any, Any]:
    """One optimizer step of the raw loop; returns the loss and the batch."""
    import torch

    x = torch.randn(batch, 256, device=device)
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
    batch: int = 128,
    distinct_batches: int | None = None,
) -> None:
    """Fit a small Lightning module for ``steps`` steps, logging every step to ``mode``'s logger.

    ``on_batch(trainer)`` runs at the start of every training step; ``setup(trainer)`` before fit.
    With ``distinct_batches``, that many batches are cycled through in one endless epoch (long
    runs without the memory of a batch per step); otherwise every step has its own batch.
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

    if distinct_batches:
        batches = [(torch.randn(batch, 256),) for _ in range(distinct_batches)]

        class Endless(torch.utils.data.IterableDataset):
            def __iter__(self) -> Iterator[Any]:
                return itertools.cycle(batches)

        data: Any = torch.utils.data.DataLoader(Endless(), batch_size=None)
    else:
        data = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.randn(batch * steps, 256)), batch_size=batch
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


class StepClock:
    """Wall time, the training thread's CPU time and the process's CPU time at every step of a run."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, float, float]] = []

    def tick(self, *_: Any) -> None:
        """Call from the training thread, at the same point of every step."""
        self.marks.append((time.perf_counter(), time.thread_time(), time.process_time()))

    def per_step(self, skip: int) -> dict[str, float]:
        """Means per step from step ``skip`` to the last: wall time, the training thread's CPU,
        the CPU of the process's other threads, and the training thread's waits (wall time it
        was not running: the GIL held by another thread, or its core taken)."""
        first, last = self.marks[skip], self.marks[-1]
        n = len(self.marks) - 1 - skip
        wall, thread, process = ((b - a) / n for a, b in zip(first, last, strict=True))
        return {"step_s": wall, "thread_s": thread, "other_s": process - thread, "wait_s": wall - thread}


@contextlib.contextmanager
def tracking(mode: str, obj: Any, store: str) -> Iterator[Any]:
    """One run's tracker: traincard set up around ``obj`` and shut down after; a peer finished.

    Peers wired through a framework integration start with the run; wandb and MLflow runs left
    open by it are finished here so that nothing of a tracked run carries into the next one.
    """
    if mode != "traincard":
        try:
            yield None
        finally:
            finish_peer(mode)
        return
    import traincard_otel

    handle = traincard_otel.instrument(obj, store=store)
    try:
        yield handle
    finally:
        handle.close()
        traincard_otel.shutdown()


def finish_peer(mode: str) -> None:
    if mode == "wandb":
        import wandb

        wandb.finish()
    elif mode == "mlflow":
        import mlflow

        mlflow.end_run()


def run_hf(mode: str, steps: int, clock: StepClock, store: str) -> None:
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            clock.tick()

    with tempfile.TemporaryDirectory() as out:
        trainer = hf_trainer(mode, out, steps, [Clock()])
        with tracking(mode, trainer, store):
            trainer.train()


def run_lightning(mode: str, steps: int, clock: StepClock, store: str) -> None:
    with contextlib.ExitStack() as stack:
        lightning_fit(
            mode, steps, clock.tick, lambda trainer: stack.enter_context(tracking(mode, trainer, store))
        )


def run_raw(mode: str, steps: int, clock: StepClock, store: str) -> None:
    import torch

    model = raw_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with tracking(mode, opt, store) as tracker:
        peer = raw_loop_logger(mode, os.environ["TRAINCARD_DIR"])
        try:
            for step in range(steps):
                loss, x = raw_step(model, opt)
                if tracker is not None:
                    tracker.log(loss=loss.detach(), batch=x)
                if peer is not None:
                    peer.log(step, loss.item())
                clock.tick()
        finally:
            if peer is not None:
                peer.close()


RUNS = {"hf": run_hf, "lightning": run_lightning, "raw": run_raw}


def run_order(pairs: int) -> list[bool]:
    """Whether each run is tracked: one unpaired warm-up of each, then ``pairs`` pairs in ABBA order."""
    order = [False, True]
    for i in range(pairs):
        order += [False, True] if i % 2 == 0 else [True, False]
    return order


def child(framework: str, mode: str, steps: int, pairs: int, skip: int) -> None:
    """Train plain and tracked runs in ABBA order; print each run's figures as JSON."""
    import torch

    torch.set_num_threads(1)
    settle = settler(max_s=10.0)
    runs: list[dict[str, Any]] = []
    for n, tracked in enumerate(run_order(pairs)):
        clock = StepClock()
        RUNS[framework](mode if tracked else "plain", steps, clock, f"{os.environ['TRAINCARD_DIR']}/run-{n}")
        runs.append({"tracked": tracked, "warmup": n < 2, **clock.per_step(skip)})
        settle()  # a tracker's leftover work is not charged to the next run
    print(json.dumps(runs))


def pairs_of(runs: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """``(tracked, plain)`` values of ``key`` for each adjacent pair of timed runs."""
    timed = [r for r in runs if not r["warmup"]]
    pairs = zip(timed[0::2], timed[1::2], strict=False)
    return [(a[key], b[key]) if a["tracked"] else (b[key], a[key]) for a, b in pairs]


def _run(framework: str, mode: str, steps: int, pairs: int, skip: int, run_dir: str) -> list[dict[str, Any]]:
    os.makedirs(run_dir)
    cmd = [sys.executable, "-m", "benchmarks.bench_end_to_end", "--child", framework, mode]
    cmd += ["--steps", str(steps), "--pairs", str(pairs), "--skip", str(skip)]
    out = subprocess.run(
        cmd, cwd=REPO, env=child_environment(run_dir), capture_output=True, text=True, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    runs: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return runs


def overhead_row(framework: str, tracker: str, processes: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The step-time overhead of ``tracker`` from the runs of each of its child processes."""
    ratios = [[t / p - 1 for t, p in pairs_of(runs, "step_s")] for runs in processes]
    every = [r for group in ratios for r in group]
    wall = spread(every)
    low, high = median_interval(ratios)
    per_process = [statistics.median(group) for group in ratios]
    plain_ms = statistics.median(p for runs in processes for _t, p in pairs_of(runs, "step_s")) * 1e3

    def difference_us(key: str) -> float:
        return statistics.median(t - p for runs in processes for t, p in pairs_of(runs, key)) * 1e6

    wait_us = difference_us("wait_s")
    return {
        "framework": framework,
        "tracker": tracker,
        "plain_ms": plain_ms,
        "processes": len(processes),
        "pairs": wall["n"],
        "overhead_pct": wall["median"] * 100,
        "p25_pct": wall["p25"] * 100,
        "p75_pct": wall["p75"] * 100,
        "ci95_low_pct": low * 100,
        "ci95_high_pct": high * 100,
        "process_min_pct": min(per_process) * 100,
        "process_max_pct": max(per_process) * 100,
        # What the tracker's threads cost the training thread, what the training thread itself
        # did more, and the CPU of the process's other threads.
        "wait_us": wait_us,
        "wait_pct": wait_us / (plain_ms * 10),
        "thread_us": difference_us("thread_s"),
        "other_cpu_us": difference_us("other_s"),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Per framework and tracker: step time of plain and tracked runs and the overhead over pairs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per run")
    parser.add_argument("--pairs", type=int, default=10, help="plain/tracked run pairs per tracker")
    parser.add_argument(
        "--processes", type=int, default=1, help="child processes per tracker, sharing the pairs"
    )
    parser.add_argument("--skip", type=int, default=20, help="first steps of each run not timed")
    parser.add_argument("--framework", choices=sorted(RUNS), nargs="*", default=["hf", "lightning", "raw"])
    parser.add_argument("--no-peers", action="store_true", help="skip TensorBoard, wandb and MLflow")
    parser.add_argument(
        "--control", action="store_true", help="also time plain runs against plain runs (tracker 'none')"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--pool",
        nargs="+",
        metavar="JSON",
        default=None,
        help="train nothing: the figures over every process of these earlier runs' --json files",
    )
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "TRACKER"), default=None)
    args = parser.parse_args(argv)
    if args.child:
        framework, mode = args.child
        child(framework, mode, args.steps, args.pairs, args.skip)
        return {}
    if args.pool:
        return pooled(args.pool, args.json)
    steps, pairs, skip = (12, 1, 2) if args.quick else (args.steps, args.pairs, args.skip)
    processes = 1 if args.quick else max(1, min(args.processes, pairs))
    frameworks = ["raw"] if args.quick else args.framework
    trackers = ["traincard", *([] if args.no_peers else installed_peers())]
    trackers += ["none"] if args.control else []
    rows, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for fw in frameworks:
            runs: dict[str, list[list[dict[str, Any]]]] = {mode: [] for mode in trackers}
            # Trackers take turns process by process, so a slow stretch of the machine is shared.
            for n in range(processes):
                share = pairs // processes + (n < pairs % processes)
                for mode in trackers:
                    runs[mode].append(_run(fw, mode, steps, share, skip, f"{tmp}/{fw}-{mode}-{n}"))
            for mode in trackers:
                raw[f"{fw}/{mode}"] = runs[mode]
                rows.append(overhead_row(fw, mode, runs[mode]))
    return report(
        "end_to_end",
        rows,
        None,
        args.json,
        steps=steps,
        pairs=pairs,
        processes=processes,
        skip=skip,
        raw=raw,
    )


def pooled(paths: Sequence[str], json_path: str | None) -> dict[str, Any]:
    """Rows over the processes of several runs (their ``--json`` files) taken together.

    Each run's processes keep their own pairs, so the interval still resamples processes, then
    pairs: runs on different days, on a machine running faster or slower, pool as processes do.
    """
    processes: dict[str, list[list[dict[str, Any]]]] = {}
    for path in paths:
        for key, runs in json.loads(Path(path).read_text())["raw"].items():
            processes.setdefault(key, []).extend(runs)
    rows = []
    for key, runs in processes.items():
        framework, tracker = key.split("/")
        rows.append(overhead_row(framework, tracker, runs))
    return report("end_to_end", rows, None, json_path, pooled=[Path(p).name for p in paths], raw=processes)


if __name__ == "__main__":
    main()
