"""The step anatomy's cost: a raw loop of 10 ms CPU steps with the anatomy's hooks and without.

    python -m benchmarks.bench_anatomy [--pairs 600] [--block 10] [--step-ms 10] [--output-hooks] [--quick]
        [--json F]
    python -m benchmarks.bench_anatomy --where [--pairs 150] [--json F]
    python -m benchmarks.bench_anatomy --instructions [--steps 40] [--json F]
    python -m benchmarks.bench_anatomy --mechanisms [--steps 200] [--batch 16] [--json F]

One process, one tracker (``instrument(optimizer, model=model)``), one thread of torch: the model
(an MLP whose batch is sized so that forward, backward and the SGD step take about ``--step-ms``)
trains in pairs of blocks of ``--block`` steps, one block with the anatomy (its forward, backward,
optimizer hooks and the parts each step end carries to the converter) and one without (the hooks
removed and no clock), the order drawn per pair, so the machine's drift cancels within a pair. The
tracker itself (step ends, ``log()``, its background threads) runs in both. Reported, by wall time
and by the training thread's CPU time: each side's time per step, the overhead ``sum(on) /
sum(off) - 1`` with a bootstrap 95 % interval over pairs, and the median of the pairs' differences
in µs per step; then, on a model small enough that the hooks are most of the step, the same
difference in CPU time over many steps: the anatomy's own cost per step, which the 10 ms ratio
holds within its noise.

``--where``: the same pairs of blocks, the training thread's CPU time split by where the step
spends it (the forward, the loss, ``zero_grad``, backward, the optimizer's step and ``log()``, which
carries the step end and its parts), each part's mean on and off and the median of the pairs'
differences: which part of the step the anatomy's cost lands in.

``--instructions``: clocks on a shared machine drift by more than the figure sought, so the same
10 ms step (its batch sized natively) runs in two processes under valgrind's callgrind, one with
the anatomy and one with ``anatomy=False``, counting the instructions of ``--steps`` steps after a
warm-up (``bench_log_every_step.count_instructions``): the training thread's and every thread's
(the converter's work on the parts included), per step and as a change. Instructions are not
time, but no other process's load changes them.

``--mechanisms``: the instructions each way of marking a part costs, one at a time in one process
under callgrind (``benchmarks/anatomy_mechanisms.py``): what the anatomy's design chose between.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import anatomy_mechanisms as mechanisms
from benchmarks._harness import bootstrap_interval, report


def _setup(step_ms: float) -> tuple[Any, Any, Any, int]:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    batch = 64
    for _ in range(6):  # size the batch so that a step takes about step_ms
        x = torch.randn(batch, 256)
        t0 = time.perf_counter()
        for _ in range(5):
            _step(model, opt, x)
        took = (time.perf_counter() - t0) / 5
        batch = max(1, int(batch * (step_ms / 1000) / took))
    return torch, model, opt, batch


def _step(model: Any, opt: Any, x: Any) -> Any:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


ON, OFF, HOOKS = "on", "off", "output hooks"


class Switch:
    """Turns the anatomy on and off between blocks: its hooks in or out, the clock there or not.

    ``ON`` is the anatomy as a raw loop's ``instrument()`` installs it (the forward wrapped, the
    backward bracketed around ``torch.autograd.backward``, the optimizer's hooks); ``HOOKS`` times
    the backward from a hook on the forward's output instead, as it does where a process group
    exists (to tell communication apart), so both ways are measured against the same ``OFF``."""

    def __init__(self, tracker: Any, model: Any, opt: Any) -> None:
        self.tracker, self.model, self.opt = tracker, model, opt
        self.anatomy = tracker.anatomy
        self.queue = tracker.reporter._queue
        self.clock = self.queue.parts
        self.side = ON

    def set(self, side: str) -> None:
        if side == self.side:
            return
        if self.side != OFF:
            self.anatomy.remove()
            self.queue.parts, self.tracker.anatomy = None, None
        self.side = side
        if side != OFF:
            import torch

            self.anatomy.watch_forward(self.model)
            if side == ON:
                self.anatomy.bracket_backward(torch.autograd)
            self.anatomy.watch_optimizer(self.opt, end=False)
            self.queue.parts, self.tracker.anatomy = self.clock, self.anatomy


Sides = dict[str, list[tuple[float, float]]]  # side -> (wall s, thread CPU s) per step


def _pairs(step_ms: float, pairs: int, block: int, store: str, kinds: Sequence[str]) -> tuple[Sides, int]:
    """Blocks of each side in ``kinds`` (``OFF`` among them), in an order drawn per round."""
    import traincard_otel

    torch, model, opt, batch = _setup(step_ms)
    tracker: Any = traincard_otel.instrument(
        opt, model=model, store=store, system=False, capture_console=False
    )
    switch = Switch(tracker, model, opt)
    x = torch.randn(batch, 256)
    rng = random.Random(0)
    sides: Sides = {side: [] for side in kinds}
    for _ in range(20):  # warm-up
        tracker.log(loss=_step(model, opt, x).detach(), batch=x)
    for _ in range(pairs):
        for side in rng.sample(list(kinds), len(kinds)):
            switch.set(side)
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(block):
                tracker.log(loss=_step(model, opt, x).detach(), batch=x)
            sides[side].append(((time.perf_counter() - t0) / block, (time.thread_time() - c0) / block))
            # each side as it says: the bracket taken on ON, the output's hooks on HOOKS
            assert side == OFF or switch.anatomy.bracketed == (side == ON), side
    switch.set(ON)
    traincard_otel.shutdown()
    return sides, batch


SEGMENTS = ("forward", "loss", "zero_grad", "backward", "optimizer step", "log()")


def _where(step_ms: float, pairs: int, block: int, store: str) -> list[dict[str, Any]]:
    """The training thread's CPU µs per step in each of ``SEGMENTS``, anatomy on and off."""
    import traincard_otel

    torch, model, opt, batch = _setup(step_ms)
    tracker: Any = traincard_otel.instrument(
        opt, model=model, store=store, system=False, capture_console=False
    )
    switch = Switch(tracker, model, opt)
    x = torch.randn(batch, 256)
    clock = time.thread_time

    def step(spent: list[float]) -> None:
        t0 = clock()
        out = model(x)
        t1 = clock()
        loss = out.pow(2).mean()
        t2 = clock()
        opt.zero_grad()
        t3 = clock()
        loss.backward()
        t4 = clock()
        opt.step()
        t5 = clock()
        tracker.log(loss=loss.detach(), batch=x)
        t6 = clock()
        for i, took in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
            spent[i] += took

    for _ in range(20):  # warm-up
        step([0.0] * len(SEGMENTS))
    rng = random.Random(0)
    sides: dict[str, list[list[float]]] = {ON: [], OFF: []}
    for _ in range(pairs):
        for side in rng.sample([ON, OFF], 2):
            switch.set(side)
            spent = [0.0] * len(SEGMENTS)
            for _ in range(block):
                step(spent)
            sides[side].append([1e6 * s / block for s in spent])
    switch.set(ON)
    traincard_otel.shutdown()
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(SEGMENTS):
        on, off = [b[i] for b in sides[ON]], [b[i] for b in sides[OFF]]
        rows.append(
            {
                "case": f"{name}: thread CPU µs / step",
                "on": statistics.mean(on),
                "off": statistics.mean(off),
                "median pair difference": statistics.median(a - b for a, b in zip(on, off, strict=True)),
            }
        )
    return rows


def _hook_cost(steps: int, rounds: int, store: str) -> tuple[float, float]:
    """Thread CPU µs per step of a tiny model's loop with the anatomy and without (medians of
    rounds; CPU time, which another process's load on the cores disturbs less than wall time)."""
    import torch

    import traincard_otel

    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    tracker: Any = traincard_otel.instrument(
        opt, model=model, store=store, system=False, capture_console=False
    )
    switch = Switch(tracker, model, opt)
    x = torch.randn(2, 4)
    sides: dict[str, list[float]] = {ON: [], OFF: []}
    for r in range(rounds):
        for side in (ON, OFF) if r % 2 else (OFF, ON):
            switch.set(side)
            t0 = time.thread_time()
            for _ in range(steps):
                tracker.log(loss=_step(model, opt, x).detach())
            sides[side].append(1e6 * (time.thread_time() - t0) / steps)
    switch.set(ON)
    traincard_otel.shutdown()
    return statistics.median(sides[ON]), statistics.median(sides[OFF])


def _child(anatomy: bool, batch: int, steps: int) -> None:
    """One process under callgrind: warm up, then count the instructions of ``steps`` steps."""
    import torch

    import traincard_otel
    from benchmarks.log_every_step.harness import count_instructions

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    tracker: Any = traincard_otel.instrument(
        opt, model=model, anatomy=anatomy, system=False, capture_console=False
    )
    x = torch.randn(batch, 256)
    for _ in range(10):
        tracker.log(loss=_step(model, opt, x).detach(), batch=x)
    count_instructions(True)
    for _ in range(steps):
        tracker.log(loss=_step(model, opt, x).detach(), batch=x)
    count_instructions(False)
    traincard_otel.shutdown()


def _instructions(batch: int, steps: int) -> list[dict[str, Any]]:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from benchmarks.log_every_step.harness import REPO
    from benchmarks.log_every_step.instructions import callgrind_threads

    counts: dict[bool, dict[int, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        for anatomy in (False, True):
            out = Path(tmp, str(int(anatomy)))
            out.mkdir()
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
            cmd += [f"--callgrind-out-file={out}/cg", sys.executable, "-m", "benchmarks.bench_anatomy"]
            cmd += ["--child", str(int(anatomy)), "--batch", str(batch), "--steps", str(steps)]
            base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
            env = dict(base, PYTHONPATH=str(REPO), TRAINCARD_DIR=f"{out}/store")
            log = open(f"{out}/log", "wb")  # noqa: SIM115  (closed with the process below)
            procs[anatomy] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log), log, out)
        for anatomy, (proc, log, out) in procs.items():
            proc.wait()
            log.close()
            if proc.returncode != 0:
                raise RuntimeError((out / "log").read_bytes()[-2000:].decode(errors="replace"))
            counts[anatomy] = callgrind_threads(out, "cg")
    off, on = counts[False], counts[True]
    return [
        {"case": "training thread, anatomy off: instructions / step", "value": off[1] / steps},
        {"case": "training thread, anatomy on: instructions / step", "value": on[1] / steps},
        {"case": "training thread: change %", "value": 100 * (on[1] / off[1] - 1)},
        {"case": "every thread, anatomy off: instructions / step", "value": sum(off.values()) / steps},
        {"case": "every thread, anatomy on: instructions / step", "value": sum(on.values()) / steps},
        {"case": "every thread: change %", "value": 100 * (sum(on.values()) / sum(off.values()) - 1)},
    ]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The anatomy's overhead at ``--step-ms`` steps, and its own cost per step."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=600)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--mechanisms", action="store_true")
    parser.add_argument("--mechanisms-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--output-hooks",
        action="store_true",
        help="also time the backward from the output's hooks (as with a process group), in the same rounds",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(bool(args.child), args.batch, args.steps)
        return {}
    if args.mechanisms_child:
        mechanisms.child(args.batch, args.steps)
        return {}
    if args.mechanisms:
        batch = args.batch or 16
        if args.quick:  # each mechanism runs and takes its marks; counting takes minutes
            taken = mechanisms.child(batch, 3)
            marked = [{"mechanism": name, "marks in 3 steps": n} for name, n in taken.items()]
            return report("bench_anatomy", marked, None, args.json, mode="mechanisms")
        steps = 200 if args.steps == 40 else args.steps
        counted = mechanisms.count(batch, steps)
        return report("bench_anatomy", counted, None, args.json, mode="mechanisms", batch=batch, steps=steps)
    if args.instructions:
        batch = _setup(args.step_ms)[3]
        counted = _instructions(batch, args.steps)
        return report(
            "bench_anatomy", counted, None, args.json, mode="instructions", batch=batch, steps=args.steps
        )
    if args.where:
        with tempfile.TemporaryDirectory() as store:
            where = _where(args.step_ms, 4 if args.quick else args.pairs, args.block, store)
        return report("bench_anatomy", where, None, args.json, mode="where", pairs=args.pairs)
    pairs, block, hook_steps, rounds = (6, 3, 200, 2) if args.quick else (args.pairs, args.block, 5000, 8)
    kinds = (ON, OFF, HOOKS) if args.output_hooks else (ON, OFF)
    with tempfile.TemporaryDirectory() as store:
        sides, batch = _pairs(args.step_ms, pairs, block, store + "/pairs", kinds)
        hooks_on, hooks_off = _hook_cost(hook_steps, rounds, store + "/hooks")
    rows: list[dict[str, Any]] = [
        {
            "case": f"{clock}: anatomy off, ms / step",
            "value": 1000 * statistics.mean(s[k] for s in sides[OFF]),
        }
        for k, clock in ((0, "wall"), (1, "thread CPU"))
    ]
    for side in (s for s in kinds if s != OFF):
        label = "anatomy on" if side == ON else "anatomy on, backward from output hooks"
        for k, clock in ((0, "wall"), (1, "thread CPU")):
            on, off = [s[k] for s in sides[side]], [s[k] for s in sides[OFF]]
            lo, hi = bootstrap_interval(
                [list(zip(on, off, strict=True))],
                lambda ps: sum(a for a, _ in ps) / sum(b for _, b in ps) - 1,
            )
            rows += [
                {"case": f"{clock}: {label}, ms / step", "value": 1000 * statistics.mean(on)},
                {
                    "case": f"{clock}: {label}: overhead % (sum on / sum off - 1)",
                    "value": 100 * (sum(on) / sum(off) - 1),
                },
                {"case": f"{clock}: {label}: overhead % 95% interval, low", "value": 100 * lo},
                {"case": f"{clock}: {label}: overhead % 95% interval, high", "value": 100 * hi},
                {
                    "case": f"{clock}: {label}: median pair difference, µs / step",
                    "value": statistics.median(1e6 * (a - b) for a, b in zip(on, off, strict=True)),
                },
            ]
    rows += [
        {"case": "tiny model, anatomy on: CPU µs / step", "value": hooks_on},
        {"case": "tiny model, anatomy off: CPU µs / step", "value": hooks_off},
        {"case": "the anatomy's own cost: CPU µs / step", "value": hooks_on - hooks_off},
        {"case": "... as % of a 10 ms step", "value": (hooks_on - hooks_off) / 100},
    ]
    return report("bench_anatomy", rows, None, args.json, pairs=pairs, block=block, batch=batch)


if __name__ == "__main__":
    main()
