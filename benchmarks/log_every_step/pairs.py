"""Pairs of separate processes, one plain and one instrumented, as a user launches them.

Runs come in pairs, one of each, in ABBA order so that the machine's slow drifts cancel; the
figure is the median over pairs of ``instrumented / plain - 1`` in mean step time (from step
``--skip`` to the last), with a bootstrap 95 % interval over pairs, and the mean beside it.
``--pool`` gives the figures over earlier runs' pairs (each run names the git tree of
``traincard_otel`` it measured; runs of different code or design are refused).
"""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import bootstrap_interval

from .harness import REPO, run, run_in_turns


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


def product_code(checkout: Path = REPO) -> str | None:
    """The git tree of ``traincard_otel`` that a run measured (``+changes`` when the working tree
    differs from it), so that pooled runs are known to measure the same code; None outside git."""
    git = ["git", "-C", str(checkout)]
    tree = subprocess.run([*git, "rev-parse", "HEAD:traincard_otel"], capture_output=True, text=True)
    if tree.returncode != 0:
        return None
    clean = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "traincard_otel"]).returncode == 0
    return tree.stdout.strip() + ("" if clean else "+changes")
