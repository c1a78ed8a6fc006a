"""Step pairs: the whole tracker, its background threads included, switched on and off per step.

    python -m benchmarks.bench_step_pairs [--steps 24000] [--processes 8] [--framework hf lightning raw]
                                          [--intervals scaled default] [--control] [--before DIR]
                                          [--batch N] [--quick] [--json F]
    python -m benchmarks.bench_step_pairs --pool RUN.json [RUN.json ...] [--json F]

Whole runs (``bench_end_to_end``) carry this machine's drift: adjacent 3 s runs differ by 5-9 %,
so a 0.5 % figure needs thousands of them. ``bench_step_overhead --block 2`` cancels the drift
but leaves the tracker's background threads running in "on" and "off" steps alike. Here a
training run switches the whole tracker per step, in pairs of one "on" and one "off" step whose
order is drawn per pair (a fixed ABBA order would charge work that comes back every few steps,
an epoch's end or a garbage collection, to one side):

* in "on" steps traincard's taps run (the Trainer's wrapped events and ``training_step``; the
  Lightning callback and logger; the instrumented optimizer and ``log()`` in the raw loop), and
  its background threads (converter, store writer, system sampler, watchdog, the OTel SDK's metric
  reader) may work;
* in "off" steps the taps are out and no background thread starts any work: each of them loops
  on ``Event.wait``, and a :class:`BackgroundGate` holds it when it leaves its wait until the
  next "on" step. Work that started in an "on" step is finished before the next "off" step
  begins, and the training thread's wait for it is counted in the "on" step.

So every microsecond the tracker costs falls in "on" steps, and drift cancels within a pair
(10-25 ms). The figure leans high: work that in a real run overlaps the next steps' GIL-free
stretches is waited for here. What runs on a timer (a system sample, a metric collection, a
store flush with its state file: most of the background's work) fires by wall time but can only
run in "on" steps, which are half of it; ``--intervals scaled`` (the default) sets those timers
to twice their defaults, so that per second of "on" time they fire at their default rate, and
``--intervals default`` leaves them, counting that work twice (the watchdog's 1 s check is
counted twice either way).

The overhead is ``sum(on) / sum(off) - 1`` over all pairs, not a median: a store flush lands on
one step in a few hundred, and a median would leave it out. A process can favour one side
throughout (the same code cost 5 µs a step in one process and 53 in another), so the steps are
shared among ``--processes`` child processes, every case in turn, and the 95 % interval is a
bootstrap that resamples processes, then blocks of 50 consecutive pairs within them. The median
over pairs is shown beside it (the steady per-step cost, without the bursts; as a ratio and in
µs), with the training thread's CPU time (the mean and the median of the pairs' differences)
and the other threads' CPU per step. ``--control`` adds runs that switch the
same way with no tracker behind the switch: what the harness reads when nothing differs.
``--before DIR`` adds, for each framework, the ``traincard_otel`` of another checkout (``git
worktree add DIR REV``), run in turn with this one's in every process, so that before and after
come from one run; the harness, the training scripts and the switch stay this checkout's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from benchmarks._harness import TIMERS, bootstrap_interval, report
from benchmarks.bench_end_to_end import (
    REPO,
    child_environment,
    hf_trainer,
    lightning_fit,
    raw_model,
    raw_step,
)

WARMUP_STEPS = 200
# The trackers a child instruments with: this checkout's traincard_otel, or an older one's.
TRACKED = ("traincard", "before")
# The tracker's threads that loop on Event.wait: traincard's own and the OTel SDK's metric reader.
BACKGROUND_THREADS = ("traincard-", "OtelPeriodicExportingMetricReader")


class BackgroundGate:
    """Lets the tracker's background threads start work only while open.

    ``Event.wait`` is wrapped for the threads named in :data:`BACKGROUND_THREADS`: a thread that
    leaves its wait blocks until the gate is open, and counts as busy until it waits again.
    :meth:`close` waits until no thread is busy, so work that started while open ends before the
    gate is closed. :meth:`release` opens it for good (the run's end: shutdown must not block).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open = True
        self._released = False
        self._busy: set[int] = set()
        self.timeouts = 0  # close() calls that gave up waiting: none expected

    @contextlib.contextmanager
    def installed(self) -> Iterator[BackgroundGate]:
        """Wrap ``threading.Event.wait`` for the background threads while the block runs."""
        original = threading.Event.wait
        gate = self

        def wait(self: threading.Event, timeout: float | None = None) -> bool:
            if not threading.current_thread().name.startswith(BACKGROUND_THREADS):
                return original(self, timeout)
            gate._leave()
            try:
                return original(self, timeout)
            finally:
                gate._enter()

        threading.Event.wait = wait  # type: ignore[method-assign]
        try:
            yield self
        finally:
            self.release()
            threading.Event.wait = original  # type: ignore[method-assign]

    def _enter(self) -> None:
        with self._cond:
            while not (self._open or self._released):
                self._cond.wait()
            self._busy.add(threading.get_ident())

    def _leave(self) -> None:
        with self._cond:
            self._busy.discard(threading.get_ident())
            self._cond.notify_all()

    def set(self, open_: bool) -> None:
        with self._cond:
            self._open = open_
            self._cond.notify_all()

    def close(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._open = False
            if not self._cond.wait_for(lambda: not self._busy, timeout_s):
                self.timeouts += 1

    def release(self) -> None:
        with self._cond:
            self._released = True
            self._cond.notify_all()


def plan(steps: int, seed: int = 0) -> list[bool]:
    """Whether each timed step is an "on" step: pairs of one of each, in an order drawn per pair.

    Not a fixed ABBA: the Trainer has work that comes back every few steps (an epoch's end every
    32 steps here, the garbage collector every so many allocations), and a fixed order would
    charge it to one side whenever its period is a multiple of four.
    """
    rng = random.Random(seed)
    order: list[bool] = []
    for _ in range(steps // 2):
        first = rng.random() < 0.5
        order += [first, not first]
    return order


class StepPairs:
    """Per-step clock and switch. ``tick()`` runs at the start of every step: it ends the step
    before (after waiting for the background work an "on" step started) and switches the
    tracker for the step that starts, as :func:`plan` says.

    After ``WARMUP_STEPS`` "on" steps (set-up and first flushes), ``steps`` steps are timed; the
    gate is released at the last one so that the tracker shuts down freely.
    """

    def __init__(self, steps: int, switch: Callable[[bool], None], gate: BackgroundGate | None) -> None:
        self.switch, self.gate = switch, gate
        self.plan = plan(steps)
        self.ticks = 0
        self.on = True
        self.last = (time.perf_counter(), time.thread_time(), time.process_time())
        self.timed: list[tuple[bool, float, float, float]] = []  # (on, wall, thread CPU, other CPU)

    def tick(self) -> None:
        index = self.ticks - WARMUP_STEPS  # the timed step that starts now (negative: warm-up)
        self.ticks += 1
        on_next = True if index < 0 or index >= len(self.plan) else self.plan[index]
        switching = on_next != self.on
        # Both ways round the same calls, so that the switch costs "on" and "off" steps alike:
        # the gate is closed before the clock is read (from "on", waiting for the work that
        # step started), then the tracker is switched and the gate set for the step that starts.
        if switching and self.gate is not None:
            self.gate.close()
        now = (time.perf_counter(), time.thread_time(), time.process_time())
        if 0 < index <= len(self.plan):
            wall, thread, process = (b - a for a, b in zip(self.last, now, strict=True))
            self.timed.append((self.on, wall, thread, process - thread))
        self.last = now
        if index == len(self.plan) and self.gate is not None:
            self.gate.release()
        if switching:
            self.switch(on_next)
            if self.gate is not None:
                self.gate.set(on_next)
            self.on = on_next

    def result(self) -> dict[str, Any]:
        on = [step[1:] for step in self.timed if step[0]]
        off = [step[1:] for step in self.timed if not step[0]]
        n = min(len(on), len(off))
        return {
            "on": [list(step) for step in on[:n]],
            "off": [list(step) for step in off[:n]],
            "gate_timeouts": self.gate.timeouts if self.gate is not None else 0,
        }


def child_hf(tracker: str, steps: int, batch: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    gate = BackgroundGate()
    with tempfile.TemporaryDirectory() as out:
        trainer = hf_trainer("none", out, WARMUP_STEPS + steps + 2, [], batch=batch)
        handler: Any = trainer.callback_handler
        if tracker in TRACKED:
            import traincard_otel
            from traincard_otel.adapters._hf_taps import TAPPED_EVENTS

            traincard_otel.instrument(trainer)
            taps = {name: vars(handler)[name] for name in TAPPED_EVENTS if name in vars(handler)}
            tracked_step = vars(trainer)["training_step"]
            plain_step = tracked_step.__wrapped__
        else:  # the control: the same switching, of attributes nothing reads
            handler = types.SimpleNamespace()
            taps = dict.fromkeys(f"event_{i}" for i in range(7))
            tracked_step = plain_step = trainer.training_step

        # The Trainer logs every step; in "off" steps into a list the tracker does not read, so
        # that its converter reads one logged dict per "on" step, as it reads one per step in a run.
        logs = {True: trainer.state.log_history, False: []}

        def switch(on: bool) -> None:
            trainer.state.log_history = logs[on]
            for name, tap in taps.items():
                if on:
                    setattr(handler, name, tap)
                else:
                    vars(handler).pop(name, None)

        pairs = StepPairs(steps, switch, gate)

        def training_step(model: Any, inputs: Any, *rest: Any) -> Any:
            pairs.tick()
            return (tracked_step if pairs.on else plain_step)(model, inputs, *rest)

        trainer.training_step = training_step
        with gate.installed():
            trainer.train()
    return pairs.result()


def lightning_tracker(tracker: str, trainer: Any) -> Callable[[bool], None]:
    """Instrument ``trainer`` as ``tracker`` says and return the switch that takes the tracker's
    per-step taps in ("on") and out ("off"):

    * "traincard" and "before": the adapter's callback (from the Trainer's list), any Logger it
      added (from the Trainer's loggers), and its wrappers on the Trainer's instances
      (:func:`lightning_wrappers`; collected at the first switch, once the fit has started);
    * "none", or a peer's name: only the Trainer's loggers (a peer's, or none: the control).
    """
    callback: Any = None
    if tracker in TRACKED:
        import traincard_otel

        callback = cast(Any, traincard_otel.instrument(trainer)).callback
    loggers = list(trainer.loggers)
    on_callbacks = list(trainer.callbacks)
    off_callbacks = [cb for cb in on_callbacks if cb is not callback]
    taps: list[tuple[Any, str, Any]] | None = None  # (object, attribute, traincard's wrapper)

    def switch(on: bool) -> None:
        nonlocal taps
        if taps is None:
            taps = lightning_wrappers(trainer) if tracker in TRACKED else []
        trainer.loggers = loggers if on else []
        trainer.callbacks = on_callbacks if on else off_callbacks
        for obj, name, wrapper in taps:  # in vars(): nn.Module.__setattr__ costs µs
            if on:
                vars(obj)[name] = wrapper
            else:
                vars(obj).pop(name, None)

    return switch


def lightning_wrappers(trainer: Any) -> list[tuple[Any, str, Any]]:
    """The adapter's wrappers on the Trainer's instances, as (object, attribute, wrapper): of the
    logger connector's ``log_metrics`` and of the module's batch hooks (there once the fit has
    started). An adapter from before 2026-11-25 (a Callback with batch hooks and a Logger, both
    taken out with the Trainer's lists) has none."""
    adapter = importlib.import_module("traincard_otel.adapters.lightning")
    if not hasattr(adapter, "MODULE_HOOKS"):
        return []
    held = (
        (trainer._logger_connector, (adapter.CONNECTOR_METHOD,)),
        (trainer.lightning_module, adapter.MODULE_HOOKS),
    )
    return [(obj, name, vars(obj)[name]) for obj, names in held for name in names]


def child_lightning(tracker: str, steps: int, batch: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    gate = BackgroundGate()
    holder: dict[str, StepPairs] = {}

    def setup(trainer: Any) -> None:
        holder["pairs"] = StepPairs(steps, lightning_tracker(tracker, trainer), gate)

    with gate.installed():
        tick = lambda _trainer: holder["pairs"].tick()  # noqa: E731
        lightning_fit("none", WARMUP_STEPS + steps + 2, tick, setup, batch=batch, distinct_batches=64)
    return holder["pairs"].result()


def child_raw(tracker: str, steps: int, batch: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    gate = BackgroundGate()
    model = raw_model()
    plain_opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracked_opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle: Any = None
    if tracker in TRACKED:
        import traincard_otel

        handle = traincard_otel.instrument(tracked_opt)
    pairs = StepPairs(steps, lambda on: None, gate)
    with gate.installed(), contextlib.ExitStack() as stack:
        if handle is not None:
            stack.callback(handle.close)
        for _ in range(WARMUP_STEPS + steps + 2):
            pairs.tick()
            if pairs.on:
                loss, x = raw_step(model, tracked_opt, batch=batch)
                if handle is not None:
                    handle.log(loss=loss.detach(), batch=x)
            else:
                raw_step(model, plain_opt, batch=batch)
    return pairs.result()


CHILDREN = {"hf": child_hf, "lightning": child_lightning, "raw": child_raw}
# Batch sizes that give steps of about 5-10 ms on the CI kind of machine.
BATCH = {"hf": 16, "lightning": 384, "raw": 384}


def package_of(checkout: Path, folder: str) -> str:
    """``folder``, made to hold only ``checkout``'s ``traincard_otel`` (a link to it). As a child's
    working folder it comes first on the child's path, ahead of ``PYTHONPATH``: the child imports
    that package, and this checkout's benchmarks and examples."""
    os.makedirs(folder)
    os.symlink(checkout.resolve() / "traincard_otel", f"{folder}/traincard_otel")
    return folder


def _run(
    framework: str,
    tracker: str,
    intervals: str,
    steps: int,
    batch: int | None,
    tmp: str,
    before: Path | None = None,
) -> dict[str, Any]:
    run_dir = f"{tmp}/{framework}-{tracker}-{intervals}"
    os.makedirs(run_dir)
    env = child_environment(run_dir)
    if intervals == "scaled":
        env.update({name: str(2 * seconds) for name, seconds in TIMERS.items()})
    cwd = package_of(before, f"{run_dir}/code") if tracker == "before" and before is not None else str(REPO)
    cmd = [sys.executable, "-m", "benchmarks.bench_step_pairs", "--child", framework, tracker]
    cmd += ["--steps", str(steps), *(["--batch", str(batch)] if batch else [])]
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def overhead(groups: Sequence[tuple[Any, Any]], block: int = 50) -> dict[str, Any]:
    """``sum(on) / sum(off) - 1`` over the ``(on, off)`` step times of each child process, with a
    bootstrap 95 % interval that resamples processes, then blocks of ``block`` pairs within each
    (so it widens by as much as processes disagree), and each process's own figure."""
    import numpy as np

    blocks = []  # per process: (on, off) sums of each block of pairs
    for on, off in groups:
        on, off = np.asarray(on, dtype=float), np.asarray(off, dtype=float)
        n = max(1, len(on) // block)
        sums = zip(on[: n * block].reshape(n, -1).sum(1), off[: n * block].reshape(n, -1).sum(1), strict=True)
        blocks.append([(float(a), float(b)) for a, b in sums])

    def ratio(drawn: list[tuple[float, float]]) -> float:
        return sum(on for on, _ in drawn) / sum(off for _, off in drawn) - 1

    low, high = bootstrap_interval(blocks, ratio)
    every_on = np.concatenate([np.asarray(on, dtype=float) for on, _ in groups])
    every_off = np.concatenate([np.asarray(off, dtype=float) for _, off in groups])
    return {
        "pct": float(every_on.sum() / every_off.sum() - 1) * 100,
        "ci95_low_pct": low * 100,
        "ci95_high_pct": high * 100,
        "median_pair_pct": float(np.median(every_on / every_off - 1)) * 100,
        "per_process_pct": [float(np.sum(on) / np.sum(off) - 1) * 100 for on, off in groups],
    }


def row(framework: str, tracker: str, intervals: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    import numpy as np

    steps = [(np.asarray(r["on"]), np.asarray(r["off"])) for r in results]
    on, off = np.concatenate([s[0] for s in steps]), np.concatenate([s[1] for s in steps])
    wall = overhead([(s[0][:, 0], s[1][:, 0]) for s in steps])
    return {
        "framework": framework,
        "tracker": tracker,
        "intervals": intervals,
        "processes": len(results),
        "pairs": len(on),
        "off_ms": float(off[:, 0].mean()) * 1e3,
        "overhead_pct": wall["pct"],
        "ci95_low_pct": wall["ci95_low_pct"],
        "ci95_high_pct": wall["ci95_high_pct"],
        "process_min_pct": min(wall["per_process_pct"]),
        "process_max_pct": max(wall["per_process_pct"]),
        "added_us": float(on[:, 0].mean() - off[:, 0].mean()) * 1e6,
        "median_pair_pct": wall["median_pair_pct"],
        # Medians of the pairs' differences: the steady cost, robust to a loaded machine's bursts.
        "median_pair_us": float(np.median(on[:, 0] - off[:, 0])) * 1e6,
        "thread_cpu_us": float(on[:, 1].mean() - off[:, 1].mean()) * 1e6,
        "median_thread_cpu_us": float(np.median(on[:, 1] - off[:, 1])) * 1e6,
        # CPU of the process's other threads (the tracker's) per step, "on" and "off".
        "other_cpu_on_us": float(on[:, 2].mean()) * 1e6,
        "other_cpu_off_us": float(off[:, 2].mean()) * 1e6,
        "gate_timeouts": sum(r["gate_timeouts"] for r in results),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Per framework and timer setting: the tracker's whole cost per step, "on" against "off"."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=24000, help="timed steps in all (half of them on)")
    parser.add_argument("--processes", type=int, default=8, help="child processes sharing the steps")
    parser.add_argument("--framework", choices=sorted(CHILDREN), nargs="*", default=sorted(CHILDREN))
    parser.add_argument("--intervals", choices=["scaled", "default"], nargs="*", default=["scaled"])
    parser.add_argument("--control", action="store_true", help="also a run that switches nothing")
    parser.add_argument(
        "--before", type=Path, default=None, help="another checkout's traincard_otel, as one more case"
    )
    parser.add_argument("--batch", type=int, default=None, help="batch size (default: steps of 5-10 ms)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--pool", nargs="+", metavar="RUN.json", help="figures over earlier runs' processes")
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "TRACKER"), default=None)
    args = parser.parse_args(argv)
    if args.child:
        framework, tracker = args.child
        result = CHILDREN[framework](tracker, args.steps, args.batch or BATCH[framework])
        package = sys.modules.get("traincard_otel")  # the code measured (none in the control)
        result["code"] = os.path.realpath(os.path.dirname(package.__file__ or "")) if package else None
        print(json.dumps(result))
        return {}
    if args.pool:
        pooled: dict[str, list[dict[str, Any]]] = {}
        for path in args.pool:
            for key, results in json.loads(Path(path).read_text())["raw"].items():
                pooled.setdefault(key, []).extend(results)
        rows = []
        for key, results in pooled.items():
            framework, tracker, intervals = key.split("/")
            rows.append(row(framework, tracker, intervals, results))
        return report("step_pairs", rows, None, args.json, pooled=args.pool)
    steps, processes = (200, 2) if args.quick else (args.steps, args.processes)
    frameworks = ["raw"] if args.quick else args.framework
    cases = [(fw, "traincard", intervals) for fw in frameworks for intervals in args.intervals]
    cases += [(fw, "none", "scaled") for fw in frameworks] if args.control or args.quick else []
    if args.before and not (args.before / "traincard_otel" / "__init__.py").is_file():
        raise SystemExit(f"--before {args.before}: no traincard_otel package there (a checkout's root?)")
    if args.before:  # beside this checkout's code, in the same run
        cases += [(fw, "before", intervals) for fw in frameworks for intervals in args.intervals]
    raw: dict[str, list[dict[str, Any]]] = {"/".join(case): [] for case in cases}
    with tempfile.TemporaryDirectory() as tmp:
        # Process by process, every case in turn: drift over the minutes falls on all of them.
        # Every other process takes them in reverse order (ABBA over processes).
        for n in range(processes):
            for case in cases if n % 2 == 0 else cases[::-1]:
                result = _run(*case, steps // processes, args.batch, f"{tmp}/{n}", args.before)
                raw["/".join(case)].append(result)
    rows = [row(*case, raw["/".join(case)]) for case in cases]
    return report(
        "step_pairs",
        rows,
        None,
        args.json,
        steps=steps,
        processes=processes,
        warmup_steps=WARMUP_STEPS,
        raw=raw,
    )


if __name__ == "__main__":
    main()
