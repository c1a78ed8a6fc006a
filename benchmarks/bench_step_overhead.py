"""Step-time overhead within one process: the tracker switched on and off in alternating blocks.

    python -m benchmarks.bench_step_overhead [--steps 4000] [--block 100] [--no-peers] [--quick] [--json F]
                                             [--device cuda]

Whole runs, even in one process (``bench_end_to_end``), differ by a few percent in step time from
one to the next, more than the overhead being measured. Here one training run alternates blocks
of ``--block`` steps with the tracker attached and detached, in ABBA order, and the overhead is
the median over adjacent block pairs of ``median(on) / median(off) - 1``, with its quartiles and
a bootstrap 95 % interval: machine drift and per-process luck cancel within each pair.
With ``--block 2`` the tracker is switched at every other step and the second step of each block
is timed: drift then cancels within a few tens of milliseconds, but the background threads' work
falls on "on" and "off" steps alike, so only what the training thread pays is measured
(``bench_end_to_end`` measures what the background threads cost it: its waits).
The overhead is given twice: in wall time (what training feels, GIL waits for our threads
included, but also every hiccup of the machine) and in the training thread's CPU time
(``time.thread_time``: the work the tracker adds to the training thread; waits are not in it).

How the tracker is switched, per framework, with everything else identical:

* Hugging Face: a peer's ``TrainerCallback`` sits behind a gate that forwards its events only in
  "on" blocks; traincard's wrappers of the callback handler's events and of ``training_step`` are
  removed in "off" blocks;
* Lightning: traincard's callback and its wrappers of the module's batch hooks and of the logger
  connector's ``log_metrics`` (or a peer's logger) are removed in "off" blocks
  (``bench_step_pairs.lightning_tracker``);
* raw loop: "on" blocks step an instrumented optimizer and call the tracker, "off" blocks step a
  second, identical optimizer over the same model.

What keeps running in "off" blocks is the tracker's background work (traincard's sampler and
converter, which reads the Trainer's logged dicts in both; a peer's writer thread or service process
finishing its backlog), so this measures
what the training thread pays per step; ``bench_background`` measures the background CPU.
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
from typing import Any

from benchmarks._harness import median_interval, report, spread
from benchmarks.bench_end_to_end import (
    PEERS,
    REPO,
    child_environment,
    hf_trainer,
    installed_peers,
    lightning_fit,
    raw_loop_logger,
    raw_model,
    raw_step,
)
from benchmarks.bench_step_pairs import lightning_tracker

WARMUP_STEPS = 50


class Blocks:
    """Step clock and switch: times every step and flips the tracker at block boundaries.

    After an "on" warm-up (trackers set up lazily), blocks run off, on, on, off, off, on, ...
    so each adjacent pair holds one of each, in alternating order. The first steps of a block are
    not counted: background work of the previous block may still be finishing.
    """

    def __init__(self, block: int, switch: Callable[[bool], None]) -> None:
        self.block, self.switch = block, switch
        self.skip = max(1, block // 10)
        self.on = True
        self.ticks = 0
        self.in_block = 0
        self.last = (time.perf_counter(), time.thread_time())
        self.current: list[tuple[float, float]] = []
        self.done: list[tuple[bool, float, float]] = []  # (on, median wall, median CPU) per block

    def tick(self) -> None:
        """Call once per training step, at the same point of every step."""
        now = (time.perf_counter(), time.thread_time())
        elapsed, self.last = (now[0] - self.last[0], now[1] - self.last[1]), now
        self.ticks += 1
        if self.ticks < WARMUP_STEPS:
            return
        if self.ticks > WARMUP_STEPS:
            self.in_block += 1
            if self.in_block > self.skip:
                self.current.append(elapsed)
            if self.in_block < self.block:
                return
            wall, cpu = zip(*self.current, strict=True)
            self.done.append((self.on, statistics.median(wall), statistics.median(cpu)))
        self.current, self.in_block = [], 0
        self.on = len(self.done) % 4 in (1, 2)
        self.switch(self.on)

    def result(self) -> dict[str, Any]:
        pairs = [(a, b) if a[0] else (b, a) for a, b in zip(self.done[0::2], self.done[1::2], strict=False)]
        return {
            "ratios": [on[1] / off[1] for on, off in pairs],
            "cpu_ratios": [on[2] / off[2] for on, off in pairs],
            "on_s": [block[1] for block in self.done if block[0]],
            "off_s": [block[1] for block in self.done if not block[0]],
        }


def _emit(blocks: Blocks) -> None:
    print(json.dumps(blocks.result()))


class Gate:
    """Stands in for a ``TrainerCallback`` and forwards its events only while ``on``."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.on = inner, True

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not name.startswith("on_"):
            return target

        def forward(*args: Any, **kwargs: Any) -> Any:
            return target(*args, **kwargs) if self.on else None

        return forward


def child_hf(mode: str, steps: int, block: int, device: str) -> None:
    import torch
    from transformers import TrainerCallback

    torch.set_num_threads(1)
    holder: dict[str, Blocks] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            holder["blocks"].tick()

    with tempfile.TemporaryDirectory() as out:
        trainer = hf_trainer(mode, out, steps, [Clock()], device)
        if mode == "traincard":
            import traincard_otel
            from traincard_otel.adapters._hf_taps import TAPPED_EVENTS

            traincard_otel.instrument(trainer)
            # traincard wraps the callback handler's events and training_step on the instances
            # (the Trainer's own train() wrapper stays: training runs inside it).
            installed = [
                (obj, {name: vars(obj)[name] for name in names if name in vars(obj)})
                for obj, names in (
                    (trainer.callback_handler, TAPPED_EVENTS),
                    (trainer, ("training_step",)),
                )
            ]

            def switch(on: bool) -> None:
                for obj, attrs in installed:
                    for name, wrapper in attrs.items():
                        if on:
                            setattr(obj, name, wrapper)
                        else:
                            vars(obj).pop(name, None)

        else:
            tracked = {
                "tensorboard": "TensorBoardCallback",
                "wandb": "WandbCallback",
                "mlflow": "MLflowCallback",
            }[mode]
            callbacks = trainer.callback_handler.callbacks
            index = next(i for i, cb in enumerate(callbacks) if type(cb).__name__ == tracked)
            gate = callbacks[index] = Gate(callbacks[index])

            def switch(on: bool) -> None:
                gate.on = on

        holder["blocks"] = Blocks(block, switch)
        trainer.train()
    _emit(holder["blocks"])


def child_lightning(mode: str, steps: int, block: int, device: str) -> None:
    import torch

    torch.set_num_threads(1)
    holder: dict[str, Blocks] = {}

    def setup(trainer: Any) -> None:
        holder["blocks"] = Blocks(block, lightning_tracker(mode, trainer))

    lightning_fit(mode, steps, lambda _trainer: holder["blocks"].tick(), setup, device)
    _emit(holder["blocks"])


def child_raw(mode: str, steps: int, block: int, device: str) -> None:
    import torch

    torch.set_num_threads(1)
    model = raw_model(device)
    plain_opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracked_opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker: Any = None
    if mode == "traincard":
        import traincard_otel

        tracker = traincard_otel.instrument(tracked_opt)
    peer = raw_loop_logger(mode, os.environ["TRAINCARD_DIR"])
    state = {"on": True}
    blocks = Blocks(block, lambda on: state.update(on=on))
    for step in range(steps):
        if state["on"]:
            loss, x = raw_step(model, tracked_opt, device)
            if tracker is not None:
                tracker.log(loss=loss.detach(), batch=x)
            if peer is not None:
                peer.log(step, loss.item())
        else:
            raw_step(model, plain_opt, device)
        blocks.tick()
    _emit(blocks)


CHILDREN = {"hf": child_hf, "lightning": child_lightning, "raw": child_raw}


def _run(framework: str, mode: str, steps: int, block: int, device: str, tmp: str) -> dict[str, Any]:
    run_dir = f"{tmp}/{framework}-{mode}"
    os.makedirs(run_dir)
    env = child_environment(run_dir)
    cmd = [sys.executable, "-m", "benchmarks.bench_step_overhead", "--child", framework, mode]
    cmd += ["--steps", str(steps), "--block", str(block), "--device", device]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Per framework and tracker: median step time on and off, and the overhead over block pairs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument(
        "--framework", choices=sorted(CHILDREN), nargs="*", default=["hf", "lightning", "raw"]
    )
    parser.add_argument("--no-peers", action="store_true", help="skip TensorBoard, wandb and MLflow")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda to train on the GPU")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "TRACKER"), default=None)
    args = parser.parse_args(argv)
    if args.child:
        framework, mode = args.child
        CHILDREN[framework](mode, args.steps, args.block, args.device)
        return {}
    steps, block = (WARMUP_STEPS + 40, 10) if args.quick else (args.steps, args.block)
    frameworks = ["raw"] if args.quick else args.framework
    trackers = ["traincard", *([] if args.no_peers else installed_peers())]
    rows, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for fw in frameworks:
            for mode in trackers:
                result = raw[f"{fw}/{mode}"] = _run(fw, mode, steps, block, args.device, tmp)
                ratios = spread([r - 1 for r in result["ratios"]])
                cpu = spread([r - 1 for r in result["cpu_ratios"]])
                low, high = median_interval([[r - 1 for r in result["ratios"]]])
                cpu_low, cpu_high = median_interval([[r - 1 for r in result["cpu_ratios"]]])
                rows.append(
                    {
                        "framework": fw,
                        "tracker": mode,
                        "off_ms": statistics.median(result["off_s"]) * 1e3,
                        "on_ms": statistics.median(result["on_s"]) * 1e3,
                        "pairs": ratios["n"],
                        "overhead_pct": ratios["median"] * 100,
                        "p25_pct": ratios["p25"] * 100,
                        "p75_pct": ratios["p75"] * 100,
                        "ci95_low_pct": low * 100,
                        "ci95_high_pct": high * 100,
                        "cpu_pct": cpu["median"] * 100,
                        "cpu_p25_pct": cpu["p25"] * 100,
                        "cpu_p75_pct": cpu["p75"] * 100,
                        "cpu_ci95_low_pct": cpu_low * 100,
                        "cpu_ci95_high_pct": cpu_high * 100,
                    }
                )
    return report(
        "step_overhead",
        rows,
        None,
        args.json,
        steps=steps,
        block=block,
        device=args.device,
        peers=sorted(PEERS),
        raw=raw,
    )


if __name__ == "__main__":
    main()
