"""Where the time goes: the plain script and the instrumented one with each part switched off
(console capture, anomaly rules, the log bridge, the system sampler; then all four), all in turns
(back to back with ``--slice 0``), each case against the same round's plain run and, per step: the
training thread's CPU, its waits (wall time it was not running: the GIL held by another thread,
or its core taken) and every other thread's CPU by name (``time.pthread_getcpuclockid``,
nanosecond clocks), over the timed steps only, and the training thread's user and kernel time,
page faults, preemptions and moves between cores. CPU time is what to read on a loaded machine:
it does not move with the neighbours' load as wall time does.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .harness import KERNEL_FIGURES, REPO, VARIANTS, Case, run, run_in_turns


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
