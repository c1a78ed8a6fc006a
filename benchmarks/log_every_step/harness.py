"""The shared harness of the printing benchmark's modes: an HF Trainer on a tiny GPT-2 (about
8.5 ms a step on a free core) logs every step (``logging_steps=1``) with its printer callback, so
every step prints a line to stdout (a file here, as a task log takes it). Each run is a fresh
``python`` process, as a user launches training: the plain script, or the same script with
``traincard_otel.instrument(trainer)`` and every default (console capture on, anomaly rules on, log
bridge on).

This module is the child process (``--child``): one training run with a clock at every step's
end, its figures written as JSON (step time, the training thread's CPU and its kernel figures,
every other thread's CPU and wake-ups). The parent side starts runs back to back (:func:`run`) or
alive together taking turns (:func:`run_in_turns`).

``--malloc fixed`` (the default) fixes glibc's heap thresholds in every process alike: with
glibc's defaults the heap's page faults make two plain processes differ by up to 10 %, and the
pairs need several times as many runs to show the same. ``--layout random`` (the default) draws
each process's heap layout at random: right where the instrumented script calls ``instrument()``,
every process, plain or not, takes a random number of heap blocks of random sizes, drawn from a
seed of its own. Where a step's tensors land then varies as it does between users' scripts. With
``--layout fixed`` the plain script lays its heap out the same way every run, while the
instrumented one, which allocates more and from more threads before its first step, lands
somewhere new each run: every pair then compares one draw against the plain script's single
layout, and where that layout happens to be a fast one the instrumented runs read slower by as
much as the layouts differ (here up to 5-7 % a process).

``--slice K`` (K = 100 unless given; 0: back to back) runs a pair's (or a round's) processes
together, taking turns: each starts alone and stops itself (``SIGSTOP``: every thread of it)
before its first step and after every K steps, and the parent continues them in turn, so that
they meet the machine's drifts within a turn of each other. Back to back, processes run seconds
apart, and this VM's host changes its speed by several per cent from one second to the next. A
step's time is then the time running, summed over the turns after ``--skip``. The instrumented
process's timers (the store's flush with the converter's drain, the system sample) keep wall-clock
time while it is stopped, so with their defaults their work per second would land in its share of
the running time, counted twice over two processes: ``--intervals scaled`` (the default) sets
them to as many times their defaults as processes take turns, and ``--intervals default`` leaves
them (the watchdog's 1 s check is counted twice either way). At every turn the processes resume
with cold caches, and only the instrumented one has more threads to wake; short turns magnify
that, so the figure errs high.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import TIMERS

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent.parent
# The instrumented variants of --attribute: environment settings over the defaults.
VARIANTS: dict[str, dict[str, str]] = {
    "traincard": {},
    "no console capture": {"TRAINCARD_CAPTURE_CONSOLE": "false"},
    "no anomaly rules": {"TRAINCARD_ANOMALIES": "off"},
    "no log bridge": {"TRAINCARD_LOG_LEVEL": "OFF"},
    "no system sampler": {"TRAINCARD_SYSTEM": "false"},
    "no step anatomy": {"TRAINCARD_ANATOMY": "false"},
}

# ...and every one of them off at once: what is left is the hooks, the converter and the store.
VARIANTS["none of these"] = {
    key: value for variant in list(VARIANTS.values()) for key, value in variant.items()
}


def thread_figures() -> dict[str, tuple[float, int]]:
    """CPU seconds and wake-ups (voluntary context switches: each one a GIL taken again when the
    thread runs Python) of every live thread of this process, by thread name (same names summed)."""
    out: dict[str, tuple[float, int]] = {}
    for thread in threading.enumerate():
        if thread.ident is None or thread.native_id is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
        except OSError:  # ended between enumerate() and the read
            continue
        wakeups = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        name = thread.name.rstrip("0123456789-") or thread.name
        cpu, woke = out.get(name, (0.0, 0))
        out[name] = (cpu + seconds, woke + wakeups)
    return out


def main_thread_kernel_figures() -> tuple[float, float, int, int, int]:
    """The calling (training) thread's user and system CPU seconds, minor page faults,
    involuntary context switches and moves to another core (a moved thread finds its caches
    cold), from ``/proc/thread-self`` (CPU in clock ticks, 10 ms: read over hundreds of steps)."""
    fields = Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()
    status = Path("/proc/thread-self/status").read_text()
    sched = Path("/proc/thread-self/sched").read_text()
    tick = os.sysconf("SC_CLK_TCK")
    preempted = int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
    moved = int(sched.split("se.nr_migrations")[1].split(":")[1].split()[0])
    return int(fields[11]) / tick, int(fields[12]) / tick, int(fields[7]), preempted, moved


KERNEL_FIGURES = ("user_s", "system_s", "faults", "preempted", "migrations")

CALLGRIND = "TRAINCARD_BENCH_CALLGRIND"
CALLS = "TRAINCARD_BENCH_CALLS"  # --calls (calls.py)

# --slice K: the child stops itself (SIGSTOP, every thread at once) before its first step and after
# every K steps, and runs on when the parent continues it.
SLICE = "TRAINCARD_BENCH_SLICE"

# --malloc fixed: glibc's heap thresholds fixed, in both processes alike. By default glibc trims
# the heap's top and moves its mmap threshold as the run allocates, and the page faults that
# follow (hundreds a step here) vary from process to process by several per cent of the step;
# fixed, they go, and so does most of the spread between processes.
FIXED_MALLOC = {
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
    "MALLOC_TOP_PAD_": str(64 << 20),
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),  # glibc's largest
}

# --layout random (module docstring): "random" in a case's settings, a seed in a process's.
LAYOUT = "TRAINCARD_BENCH_LAYOUT"


def shift_heap(seed: int) -> list[int]:
    """Take 1-200 blocks of 16 B-8 KiB from glibc's heap, as ``seed`` draws them (kept by the caller)."""
    import ctypes

    rng, libc = random.Random(seed), ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    return [libc.malloc(rng.randint(16, 8192)) for _ in range(rng.randint(1, 200))]


def count_instructions(on: bool) -> None:
    """Under callgrind: zero the counts and start counting (``on``), or dump them and stop.

    ``callgrind_control`` talks to the valgrind of this process, which answers while this
    process runs: it is started, not waited for, and this thread sleeps (releasing the GIL) until
    the request has surely landed."""
    pid = os.getpid()
    first, then = (f"-z {pid}", f"-i on {pid}") if on else (f"-d end {pid}", f"-i off {pid}")
    subprocess.Popen(
        ["sh", "-c", f"{{ callgrind_control {first} && callgrind_control {then}; }} >/dev/null 2>&1"]
    )
    time.sleep(5)


def child(tracked: bool, steps: int, skip: int, result: str) -> None:
    """One training run: the script a user writes, with a clock at every step's end."""
    import torch
    from transformers import Trainer, TrainerCallback

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    torch.set_num_threads(1)
    marks: list[tuple[float, float]] = []
    threads: list[dict[str, tuple[float, int]]] = []
    kernel_marks: list[tuple[float, float, int, int, int]] = []

    counting = bool(os.environ.get(CALLGRIND))
    calls = os.environ.get(CALLS)  # --calls: the folder for the child's system-call counts
    counted = None
    if calls:
        from benchmarks.log_every_step.calls import Counting

        counted = Counting(calls)
    slice_steps = int(os.environ.get(SLICE, "0"))
    slices: list[tuple[int, float]] = []  # (steps done at a slice's end, its seconds running)
    resumed = [0.0]

    def pause() -> None:
        os.kill(os.getpid(), signal.SIGSTOP)  # returns once the parent continues this process
        resumed[0] = time.perf_counter()

    class Clock(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if slice_steps:
                pause()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            marks.append((now, time.thread_time()))
            if slice_steps and (len(marks) % slice_steps == 0 or len(marks) == steps):
                slices.append((len(marks), now - resumed[0]))
            if len(marks) in (skip + 1, steps):
                if counting:
                    count_instructions(len(marks) == skip + 1)
                if counted is not None and len(marks) == skip + 1:
                    counted.start()
                elif counted is not None:
                    counted.stop()
                threads.append(thread_figures())
                kernel_marks.append(main_thread_kernel_figures())
            if slice_steps and len(marks) % slice_steps == 0 and len(marks) < steps:
                pause()

    with tempfile.TemporaryDirectory() as out:
        args = training_args(
            out,
            max_steps=steps,
            logging_steps=1,
            eval_strategy="no",
            save_strategy="no",
            warmup_steps=0,
            disable_tqdm=True,  # the printer callback: one line per logged step
        )
        trainer = Trainer(
            model=tiny_gpt2(), args=args, train_dataset=ProgressionDataset(1024), callbacks=[Clock()]
        )
        seed = os.environ.get(LAYOUT)
        held = shift_heap(int(seed)) if seed else []  # where the instrumented script instruments
        if tracked:
            import traincard_otel

            traincard_otel.instrument(trainer)
        trainer.train()
    (wall0, cpu0), (wall1, cpu1) = marks[skip], marks[-1]
    kernel = [b - a for a, b in zip(kernel_marks[0], kernel_marks[1], strict=True)]
    n = len(marks) - 1 - skip
    main = threading.main_thread().name
    first = threads[0]
    per_step = {
        name: ((cpu - first.get(name, (0.0, 0))[0]) / n, (woke - first.get(name, (0.0, 0))[1]) / n)
        for name, (cpu, woke) in threads[1].items()
    }
    if slice_steps:  # the slices after step ``skip``: their time running, not stopped
        timed = [seconds for done, seconds in slices if done > skip]
        step_s = sum(timed) / (steps - skip)
    else:
        timed, step_s = [], (wall1 - wall0) / n
    figures = {
        "step_s": step_s,
        "turns": len(timed),
        "timers": {name: os.environ.get(name) for name in TIMERS},  # where --intervals scaled set them
        "layout": seed,
        "heap_blocks": len(held),
        "thread_s": (cpu1 - cpu0) / n,
        "threads_s": {name: cpu for name, (cpu, _) in per_step.items() if name != main},
        "wakeups": {name: woke for name, (_, woke) in per_step.items()},
        # the training thread's CPU split into user and kernel time, its minor page faults, the
        # times it was taken off its core and its moves to the other core
        **{key: value / n for key, value in zip(KERNEL_FIGURES, kernel, strict=True)},
    }
    if counted is not None:
        figures["counted"] = counted.figures(n)
    Path(result).write_text(json.dumps(figures))


def child_command(
    tracked: bool, steps: int, skip: int, tmp: str, env: dict[str, str], checkout: Path = REPO
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run whose result and store go under ``tmp``.

    ``checkout``: the source tree whose ``traincard_otel`` the process imports (an older commit's,
    for a before/after comparison from one run of this benchmark)."""
    cmd = [sys.executable, str(HERE), "--child", str(int(tracked))]
    cmd += ["--steps", str(steps), "--skip", str(skip), "--result", f"{tmp}/result.json"]
    if env.get(LAYOUT) == "random":  # a layout of its own for each process
        env = {**env, LAYOUT: str(random.randrange(1 << 32))}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
    path = os.pathsep.join(p for p in (str(checkout), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    # Unbuffered, as Metaflow runs a task: every print reaches the descriptor (and the capture's
    # pipe) at once, the most wake-ups of the capture's thread.
    return cmd, dict(base, PYTHONPATH=path, PYTHONUNBUFFERED="1", TRAINCARD_DIR=f"{tmp}/store", **env)


def child_figures(tmp: str) -> dict[str, Any]:
    """A finished run's figures, with the lines it printed to its stdout file (a task log)."""
    figures: dict[str, Any] = json.loads(Path(f"{tmp}/result.json").read_text())
    figures["stdout_lines"] = Path(f"{tmp}/stdout.log").read_bytes().count(b"\n")
    return figures


def run(tracked: bool, env: dict[str, str], steps: int, skip: int, checkout: Path = REPO) -> dict[str, Any]:
    """One fresh process, its stdout to a file (a task log), its figures back as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd, full = child_command(tracked, steps, skip, tmp, env, checkout)
        with open(f"{tmp}/stdout.log", "wb") as log:
            done = subprocess.run(
                cmd, cwd=checkout, env=full, stdout=log, stderr=subprocess.PIPE, timeout=1800
            )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.decode(errors="replace")[-2000:])
        return child_figures(tmp)


Case = tuple[bool, dict[str, str], Path]  # instrumented, environment settings, checkout


def run_in_turns(
    cases: dict[str, Case], steps: int, skip: int, slice_steps: int, scaled: bool = False
) -> dict[str, dict[str, Any]]:
    """One process per case, alive together, taking turns of ``slice_steps`` steps in the cases'
    order, each stopped whole (every thread) while another runs.

    Each process starts alone and stops itself before its first step; then this process
    continues one, waits until it has stopped itself again (or ended), and continues the next.
    The cases therefore meet the machine's drifts within a few turns of each other, where
    back-to-back processes meet them seconds apart. ``scaled``: each instrumented process's
    timers (:data:`TIMERS`) at as many times their defaults as there are cases, so that per
    second of its running time they fire at their default rate."""
    with tempfile.TemporaryDirectory() as tmp:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        folders = {name: f"{tmp}/{i}" for i, name in enumerate(cases)}
        try:
            for name, (tracked, env, checkout) in cases.items():
                os.mkdir(folders[name])
                turns = {**env, SLICE: str(slice_steps)}
                if scaled and tracked:
                    turns.update({timer: str(len(cases) * seconds) for timer, seconds in TIMERS.items()})
                cmd, full = child_command(tracked, steps, skip, folders[name], turns, checkout)
                with (
                    open(f"{folders[name]}/stdout.log", "wb") as log,
                    open(f"{folders[name]}/stderr.log", "wb") as err,
                ):
                    procs[name] = subprocess.Popen(cmd, cwd=checkout, env=full, stdout=log, stderr=err)
                wait_stopped(procs[name], folders[name])  # started alone: imports do not overlap a turn
            running = list(cases)
            while running:
                for name in list(running):
                    procs[name].send_signal(signal.SIGCONT)
                    if not wait_stopped(procs[name], folders[name]):
                        running.remove(name)
            return {name: child_figures(folders[name]) for name in cases}
        finally:
            for proc in procs.values():
                if proc.returncode is None:
                    proc.kill()  # a stopped process too
                    proc.wait()


def wait_stopped(proc: subprocess.Popen[bytes], folder: str) -> bool:
    """Wait until ``proc`` stops itself (True) or ends (False; an error unless it succeeded)."""
    _, status = os.waitpid(proc.pid, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        return True
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(Path(f"{folder}/stderr.log").read_bytes().decode(errors="replace")[-2000:])
    return False


def main(argv: Sequence[str] | None = None) -> None:
    """The child process: one run (``--child 0|1``), its figures to ``--result``."""
    parser = argparse.ArgumentParser(description="one run of the printing benchmark")
    parser.add_argument("--child", type=int, choices=(0, 1), required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--skip", type=int, required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    child(bool(args.child), args.steps, args.skip, args.result)


if __name__ == "__main__":
    main()
