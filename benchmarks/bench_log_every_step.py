"""Logging every step, as a user runs it: one process per run, instrumented or not.

    python -m benchmarks.bench_log_every_step [--pairs 20] [--steps 600] [--malloc fixed|default] [--slice K]
                                              [--layout random|fixed] [--quick] [--json F]
    python -m benchmarks.bench_log_every_step --plain-pairs [--pairs 20] [--layout random|fixed] ...
    python -m benchmarks.bench_log_every_step --pool RUN.json [RUN.json ...] [--json F]
    python -m benchmarks.bench_log_every_step --attribute [--rounds 4] [--json F]
    python -m benchmarks.bench_log_every_step --instructions [--steps 45 --skip 15] [--json F]

An HF Trainer on a tiny GPT-2 (about 8.5 ms a step on a free core) logs every step
(``logging_steps=1``) with its printer callback, so every step prints a line to stdout (a file
here, as a task log takes it). Each run is a fresh ``python`` process, as a user launches
training: the plain script, or the same script with ``traincard_otel.instrument(trainer)`` and
every default (console capture on, anomaly rules on, log bridge on). Runs come in pairs, one of
each, in ABBA order so that the machine's slow drifts cancel; the figure is the median over pairs
of ``instrumented / plain - 1`` in mean step time (from step ``--skip`` to the last), with a
bootstrap 95 % interval over pairs, and the mean beside it. ``--malloc fixed`` (the default;
``--fixed-malloc`` before) fixes glibc's heap thresholds in both processes alike (and in every
case of ``--attribute``): with glibc's defaults the heap's page faults make two plain processes
differ by up to 10 %, and the pairs need several times as many runs to show the same.
``--pool`` gives the figures over earlier runs' pairs (each run names the git tree of
``traincard_otel`` it measured; runs of different code or design are refused).

``--layout random`` (the default) draws each process's heap layout at random: right where the
instrumented script calls ``instrument()``, every process, plain or not, takes a random number of
heap blocks of random sizes, drawn from a seed of its own. Where a step's tensors land then
varies as it does between users' scripts. With ``--layout fixed`` the plain script lays its heap
out the same way every run, while the instrumented one, which allocates more and from more
threads before its first step, lands somewhere new each run: every pair then compares one
draw against the plain script's single layout, and where that layout happens to be a fast one
the instrumented runs read slower by as much as the layouts differ (here up to 5-7 % a process).
``--plain-pairs`` runs pairs of two plain processes and shows how far a pair reads from 0 % with
no tracker at all, in either layout setting.

``--slice K`` (K = 100 unless given; 0: back to back) runs a pair's two processes together, taking
turns: each starts alone and stops itself (``SIGSTOP``: every thread of it) before its first step
and after every K steps, and this process continues them in turn (the pair's order alternating
from pair to pair), so that both meet the machine's drifts within a turn of each other. Back to
back, a pair's processes run seconds apart, and this VM's host changes its speed by several per
cent from one second to the next. A step's time is then the time running, summed over the turns
after ``--skip``. The instrumented process's timers (the store's flush with the converter's drain,
the system sample) keep wall-clock time while it is stopped, so with their defaults their work per
second would land in its share of the running time, counted twice over two processes:
``--intervals scaled`` (the default) sets them to as many times their defaults as processes take
turns, and ``--intervals default`` leaves them (the watchdog's 1 s check is counted twice either
way). At every turn both processes resume with cold caches, and only the instrumented one has more
threads to wake; short turns magnify that, so the figure errs high.

``--attribute`` says where the time goes. It runs the plain script and the instrumented one
with each part switched off (console capture, anomaly rules, the log bridge, the system sampler;
then all four), all in turns as above (back to back with ``--slice 0``), and reports each case
against the same round's plain run and, per step: the training thread's CPU, its waits (wall time it
was not running: the GIL held by another thread, or its core taken) and every other thread's
CPU by name (``time.pthread_getcpuclockid``, nanosecond clocks), over the timed steps only, and
the training thread's user and kernel time, page faults, preemptions and moves between cores.
CPU time is what to read on a loaded machine: it does not move with the neighbours' load as
wall time does.

``--instructions`` counts instead of timing: the plain and the instrumented run, at once, each
under valgrind's callgrind, which counts the instructions each thread executes over the timed
steps (from step ``--skip``; the child switches the count on and dumps it there). The count is the
same whatever else the machine does, so it tells work added to the training thread from the
interference of other threads and processes, which only clocks show. Under valgrind a step takes
seconds, so the timer-driven background threads' counts are not per-step figures and are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import TIMERS, bootstrap_interval, report

REPO = Path(__file__).resolve().parent.parent
# The instrumented variants of --attribute: environment settings over the defaults.
VARIANTS: dict[str, dict[str, str]] = {
    "traincard": {},
    "no console capture": {"TRAINCARD_CAPTURE_CONSOLE": "false"},
    "no anomaly rules": {"TRAINCARD_ANOMALIES": "off"},
    "no log bridge": {"TRAINCARD_LOG_LEVEL": "OFF"},
    "no system sampler": {"TRAINCARD_SYSTEM": "false"},
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


def callgrind_threads(folder: Path, stem: str) -> dict[int, int]:
    """Instructions by thread number (1: the main thread) in callgrind's first dump: the files
    ``<stem>.1-<thread>`` that ``--separate-threads=yes`` writes, each with a ``summary:`` line."""
    counts: dict[int, int] = {}
    for path in folder.glob(f"{stem}.1-*"):
        for line in path.read_text().splitlines():
            if line.startswith("summary:"):
                counts[int(path.name.rsplit("-", 1)[1])] = int(line.split()[1])
    return counts


def instructions(steps: int, skip: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The plain and the instrumented run side by side under callgrind (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        for tracked in (False, True):
            out = Path(tmp, str(int(tracked)))
            out.mkdir()
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
            cmd += [f"--callgrind-out-file={out}/cg", sys.executable, __file__, "--child", str(int(tracked))]
            cmd += ["--steps", str(steps), "--skip", str(skip), "--result", f"{out}/result.json"]
            base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
            env = dict(base, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", TRAINCARD_DIR=f"{out}/store")
            env[CALLGRIND] = "1"
            log = open(f"{out}/stdout.log", "wb")  # noqa: SIM115  (closed with the process below)
            procs[tracked] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log), log)
        counts = {}
        for tracked, (proc, log) in procs.items():
            proc.wait()
            log.close()
            if proc.returncode != 0:
                tail = Path(tmp, str(int(tracked)), "stdout.log").read_bytes()[-2000:]
                raise RuntimeError(tail.decode(errors="replace"))
            counts[tracked] = callgrind_threads(Path(tmp, str(int(tracked))), "cg")
    n = steps - 1 - skip
    plain, instrumented = counts[False][1], counts[True][1]
    row = {
        "steps_counted": n,
        "plain_instructions_per_step": plain / n,
        "traincard_instructions_per_step": instrumented / n,
        "training_thread_change_pct": (instrumented / plain - 1) * 100,
    }
    return [row], {"threads": {str(k): v for k, v in counts.items()}}


def child(tracked: bool, steps: int, skip: int, result: str) -> None:
    """One training run: the script a user writes, with a clock at every step's end."""
    import torch
    from transformers import TrainerCallback

    sys.path.insert(0, str(REPO / "examples"))
    from tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args
    from transformers import Trainer

    torch.set_num_threads(1)
    marks: list[tuple[float, float]] = []
    threads: list[dict[str, tuple[float, int]]] = []
    kernel_marks: list[tuple[float, float, int, int, int]] = []

    counting = bool(os.environ.get(CALLGRIND))
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
    Path(result).write_text(json.dumps(figures))


def child_command(
    tracked: bool, steps: int, skip: int, tmp: str, env: dict[str, str], checkout: Path = REPO
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run whose result and store go under ``tmp``.

    ``checkout``: the source tree whose ``traincard_otel`` the process imports (an older commit's,
    for a before/after comparison from one run of this benchmark)."""
    cmd = [sys.executable, __file__, "--child", str(int(tracked))]
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


def pairs_row(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Median and mean of ``tracked / plain - 1`` over pairs, with a bootstrap 95 % interval."""
    ratios = [[t["step_s"] / p["step_s"] - 1] for t, p in pairs]
    every = [r for (r,) in ratios]
    low, high = bootstrap_interval(ratios, statistics.median)
    mean_low, mean_high = bootstrap_interval(ratios, statistics.fmean)

    def diff_us(key: str) -> float:
        return statistics.median(t[key] - p[key] for t, p in pairs) * 1e6

    def other(figures: dict[str, Any]) -> float:
        return float(sum(figures["threads_s"].values()))

    return {
        "pairs": len(pairs),
        "plain_ms": statistics.median(p["step_s"] for _, p in pairs) * 1e3,
        "tracked_ms": statistics.median(t["step_s"] for t, _ in pairs) * 1e3,
        "overhead_pct": statistics.median(every) * 100,
        "ci95_low_pct": low * 100,
        "ci95_high_pct": high * 100,
        "mean_pct": statistics.fmean(every) * 100,
        "mean_ci95_low_pct": mean_low * 100,
        "mean_ci95_high_pct": mean_high * 100,
        "thread_us": diff_us("thread_s"),
        "wait_us": statistics.median(
            (t["step_s"] - t["thread_s"]) - (p["step_s"] - p["thread_s"]) for t, p in pairs
        )
        * 1e6,
        "other_cpu_us": statistics.median(other(t) - other(p) for t, p in pairs) * 1e6,
    }


def end_to_end(
    pairs: int, steps: int, skip: int, env: dict[str, str], slice_steps: int = 0, scaled: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    done: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for i in range(pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        if slice_steps:
            cases = {"traincard" if tracked else "plain": (tracked, env, REPO) for tracked in order}
            figures = run_in_turns(cases, steps, skip, slice_steps, scaled)
            got = {cases[name][0]: figures[name] for name in cases}
        else:
            got = {tracked: run(tracked, env, steps, skip) for tracked in order}
        done.append((got[True], got[False]))
        t, p = got[True]["step_s"], got[False]["step_s"]
        change = (t / p - 1) * 100
        print(f"pair {i + 1}/{pairs}: plain {p * 1e3:.2f} ms, traincard {t * 1e3:.2f} ms ({change:+.2f} %)")
    return [pairs_row(done)], {"pairs": [[t, p] for t, p in done]}


def plain_pairs(
    pairs: int, steps: int, skip: int, env: dict[str, str], slice_steps: int = 0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Pairs of two plain processes, as the end-to-end pairs run: how far a pair reads from 0 % when
    nothing differs but the process (its heap layout, unless the layout is fixed)."""
    ratios: list[float] = []
    for i in range(pairs):
        names = ("plain A", "plain B") if i % 2 == 0 else ("plain B", "plain A")
        if slice_steps:
            figures = run_in_turns({name: (False, env, REPO) for name in names}, steps, skip, slice_steps)
        else:
            figures = {name: run(False, env, steps, skip) for name in names}
        a, b = figures["plain A"]["step_s"], figures["plain B"]["step_s"]
        ratios.append(a / b - 1)
        print(f"pair {i + 1}/{pairs}: plain A {a * 1e3:.2f} ms, plain B {b * 1e3:.2f} ms ({ratios[-1]:+.2%})")
    row = {
        "pairs": pairs,
        "median_pct": statistics.median(ratios) * 100,
        "mean_pct": statistics.fmean(ratios) * 100,
        "sd_pct": statistics.stdev(ratios) * 100 if pairs > 1 else 0.0,
        "largest_pct": max(abs(r) for r in ratios) * 100,
    }
    return [row], {"ratios": ratios}


def product_code(checkout: Path = REPO) -> str | None:
    """The git tree of ``traincard_otel`` that a run measured (``+changes`` when the working tree
    differs from it), so that pooled runs are known to measure the same code; None outside git."""
    git = ["git", "-C", str(checkout)]
    tree = subprocess.run([*git, "rev-parse", "HEAD:traincard_otel"], capture_output=True, text=True)
    if tree.returncode != 0:
        return None
    clean = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "traincard_otel"]).returncode == 0
    return tree.stdout.strip() + ("" if clean else "+changes")


def pool(runs: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """The pairs of earlier end-to-end runs (their ``--json`` files) as one sample: runs of the
    same product code (where a run names it) in one malloc setting; mixing either is refused."""
    settings = {run["results"][0].get("malloc", "default") for run in runs}
    if len(settings) != 1:
        raise SystemExit(f"--pool: runs in different malloc settings ({', '.join(sorted(settings))})")
    designs = {run["results"][0].get("design", "back to back") for run in runs}
    if len(designs) != 1:
        raise SystemExit(f"--pool: runs of different designs ({', '.join(sorted(designs))})")
    codes = {run["code"] for run in runs if run.get("code")}
    if len(codes) > 1 or any(code.endswith("+changes") for code in codes):
        raise SystemExit(f"--pool: runs of different or uncommitted code ({', '.join(sorted(codes))})")
    pairs = [(tracked, plain) for run in runs for tracked, plain in run["raw"]["pairs"]]
    row = pairs_row(pairs)
    (setting,), (design,) = settings, designs
    raw = {"pairs": [[t, p] for t, p in pairs]}
    return [{"malloc": setting, "design": design, **row}], raw, next(iter(codes), None)


def attribute(
    rounds: int,
    steps: int,
    skip: int,
    before: Path | None,
    variants: Sequence[str],
    env: dict[str, str],
    slice_steps: int = 0,
    scaled: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cases: dict[str, Case] = {"plain": (False, env, REPO)}
    if before is not None:
        cases["traincard (before)"] = (True, env, before)
    cases.update({name: (True, {**env, **VARIANTS[name]}, REPO) for name in variants})
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        if slice_steps:  # every case of the round alive together, in turns
            got = run_in_turns({name: cases[name] for name in order}, steps, skip, slice_steps, scaled)
        else:
            got = {name: run(*cases[name][:2], steps, skip, cases[name][2]) for name in order}
        for name in order:
            runs[name].append(got[name])
            print(f"round {r + 1}/{rounds}: {name} {got[name]['step_s'] * 1e3:.2f} ms")
    rows = []
    for name, figures in runs.items():
        threads: dict[str, list[float]] = {}
        for f in figures:
            for thread, seconds in f["threads_s"].items():
                threads.setdefault(thread, []).append(seconds)
        row: dict[str, Any] = {
            "case": name,
            "step_ms": statistics.median(f["step_s"] for f in figures) * 1e3,
            # each round's run against the same round's plain one
            "vs_plain_pct": statistics.median(
                f["step_s"] / p["step_s"] - 1 for f, p in zip(figures, runs["plain"], strict=True)
            )
            * 100,
            "train_cpu_us": statistics.median(f["thread_s"] for f in figures) * 1e6,
            "train_wait_us": statistics.median(f["step_s"] - f["thread_s"] for f in figures) * 1e6,
            "other_cpu_us": statistics.median(sum(f["threads_s"].values()) for f in figures) * 1e6,
        }
        row.update({f"{t} us": statistics.median(v) * 1e6 for t, v in sorted(threads.items())})
        wakeups: dict[str, list[float]] = {}
        for f in figures:
            for thread, n in f["wakeups"].items():
                wakeups.setdefault(thread, []).append(n)
        row.update({f"{t} wakeups": statistics.median(v) for t, v in sorted(wakeups.items())})
        for key in KERNEL_FIGURES:
            if key.endswith("_s"):
                row[f"train_{key[:-2]}_us"] = statistics.median(f[key] for f in figures) * 1e6
            else:
                row[f"train_{key}"] = statistics.median(f[key] for f in figures)
        rows.append(row)
    return rows, {"runs": runs}


def child_converter(steps: int, result: str) -> None:
    """The converter's CPU for what an HF run logging and printing every step hands it: per step
    four logged figures, a step end and a console line, drained every 117 steps (a second of
    8.5 ms steps), into the store's exporters (in memory) and written as the store writes. The
    pipeline is a run's, with no other log reader attached (``testing.capture`` attaches one)."""
    from traincard_otel._schema import LogLine
    from traincard_otel._write import pipeline as _pipeline
    from traincard_otel._write.report.reporter import Reporter
    from traincard_otel.testing import MemoryBackend

    attrs = {"traincard.rank": "0", "log.iostream": "stdout"}
    drain_s = write_s = 0.0
    pipeline = _pipeline.start(
        backend=MemoryBackend(), system=False, flush_interval_s=3600.0, capture_console=False
    )
    assert pipeline is not None
    try:
        reporter, queue = Reporter._bound(pipeline), pipeline.queue
        for step in range(1, steps + 1):
            logs = {"loss": 1.0 / step, "grad_norm": 0.5, "learning_rate": 1e-3, "epoch": step / 64}
            reporter.metrics(logs, step)
            reporter.step_end(step, 0.0085, 16, 512)
            queue.put(LogLine(time.time(), "INFO", repr(logs), None, attrs))
            if step % 117 == 0 or step == steps:
                t0 = time.thread_time()
                pipeline.converter.drain()
                t1 = time.thread_time()
                pipeline.flush()
                drain_s, write_s = drain_s + t1 - t0, write_s + time.thread_time() - t1
    finally:
        _pipeline.shutdown()
    Path(result).write_text(json.dumps({"drain_s": drain_s / steps, "write_s": write_s / steps}))


def converter(rounds: int, steps: int, before: Path | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    checkouts = {"after": REPO} if before is None else {"before": before, "after": REPO}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for r in range(rounds):
        for name in list(checkouts) if r % 2 == 0 else reversed(list(checkouts)):
            with tempfile.TemporaryDirectory() as tmp:
                result = f"{tmp}/result.json"
                cmd = [sys.executable, __file__, "--child-converter", "--steps", str(steps)]
                path = os.pathsep.join((str(checkouts[name]), str(REPO)))
                env = dict(os.environ, PYTHONPATH=path, TRAINCARD_DIR=f"{tmp}/store")
                subprocess.run([*cmd, "--result", result], cwd=checkouts[name], env=env, check=True)
                runs[name].append(json.loads(Path(result).read_text()))
    rows = [
        {
            "code": name,
            "runs": len(figures),
            "drain_us": statistics.median(f["drain_s"] for f in figures) * 1e6,
            "store_write_us": statistics.median(f["write_s"] for f in figures) * 1e6,
        }
        for name, figures in runs.items()
    ]
    return rows, {"runs": runs}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--skip", type=int, default=100)
    parser.add_argument("--attribute", action="store_true", help="per-thread CPU of each variant")
    parser.add_argument(
        "--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS), help="with --attribute"
    )
    parser.add_argument(
        "--before", type=Path, help="with --attribute or --converter: an older checkout, as one more case"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="the training thread's instructions, under callgrind"
    )
    parser.add_argument(
        "--malloc",
        choices=("fixed", "default"),
        default="fixed",
        help="glibc's heap thresholds fixed in every process (the default), or glibc's defaults",
    )
    parser.add_argument(  # the former switch, now the default
        "--fixed-malloc", action="store_const", const="fixed", dest="malloc", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--slice",
        type=int,
        default=100,
        metavar="K",
        help="run each case's processes together, taking turns of K steps (default 100; 0: back to back)",
    )
    parser.add_argument(
        "--intervals",
        choices=("scaled", "default"),
        default="scaled",
        help="with --slice: the timers of each instrumented process scaled to its share of the time",
    )
    parser.add_argument(
        "--layout",
        choices=("random", "fixed"),
        default="random",
        help="each process's heap layout drawn at random (the default), or each script's own",
    )
    parser.add_argument(
        "--plain-pairs", action="store_true", help="pairs of two plain processes: the spread with no tracker"
    )
    parser.add_argument("--pool", nargs="+", metavar="RUN.json", help="the figures over earlier runs' pairs")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--converter", action="store_true", help="the converter's CPU per step, in this process"
    )
    parser.add_argument("--child", type=int, choices=(0, 1), help=argparse.SUPPRESS)
    parser.add_argument("--child-converter", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_converter:
        child_converter(args.steps, args.result)
        return {}
    if args.child is not None:
        child(bool(args.child), args.steps, args.skip, args.result)
        return {}
    if args.pool:
        rows, raw, code = pool([json.loads(Path(path).read_text()) for path in args.pool])
        return report("log_every_step", rows, None, args.json, raw=raw, pooled=args.pool, code=code)
    if args.quick:
        args.pairs, args.rounds, args.steps, args.skip = 1, 1, 12, 4
        args.slice = min(args.slice, 4)
    if args.converter:
        rows, raw = converter(args.rounds, args.steps * 10, args.before)
        return report("log_every_step_converter", rows, None, args.json, raw=raw)
    if args.instructions:
        # Under valgrind a step takes seconds: unless asked otherwise, fewer steps than for timing.
        steps, skip = (45, 15) if (args.steps, args.skip) == (600, 100) else (args.steps, args.skip)
        rows, raw = instructions(steps, skip)
        return report("log_every_step_instructions", rows, None, args.json, raw=raw)
    if args.slice < 0 or (args.slice and args.skip % args.slice):  # (the modes above run no turns)
        parser.error(f"--slice {args.slice}: give a K that divides --skip ({args.skip}), or 0 (back to back)")
    malloc_env = dict(FIXED_MALLOC) if args.malloc == "fixed" else {}
    if args.layout == "random":
        malloc_env[LAYOUT] = "random"
    design = f"turns of {args.slice} steps" if args.slice else "back to back"
    design += ", random heap layout" if args.layout == "random" else ""
    if args.plain_pairs:
        rows, raw = plain_pairs(args.pairs, args.steps, args.skip, malloc_env, args.slice)
        rows = [{"malloc": args.malloc, "design": design, **row} for row in rows]
        return report("log_every_step_plain_pairs", rows, None, args.json, raw=raw)
    if args.attribute:
        rows, raw = attribute(
            args.rounds,
            args.steps,
            args.skip,
            args.before,
            args.variants,
            malloc_env,
            args.slice,
            args.intervals == "scaled",
        )
        columns = list(dict.fromkeys(key for row in rows for key in row))  # threads of every case
        return report("log_every_step_attribution", rows, columns, args.json, raw=raw)
    code = product_code()
    scaled = args.intervals == "scaled"
    rows, raw = end_to_end(args.pairs, args.steps, args.skip, malloc_env, args.slice, scaled)
    design += ", timers scaled" if args.slice and scaled else ""
    rows = [{"malloc": args.malloc, "design": design, **row} for row in rows]
    return report("log_every_step", rows, None, args.json, raw=raw, code=code)


if __name__ == "__main__":
    main()
