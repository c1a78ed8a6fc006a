"""Pairs of two plain processes: how far a pair reads from 0 % with no tracker at all, in either
layout setting (the harness's ``--layout``)."""

from __future__ import annotations

import statistics
from typing import Any

from .harness import REPO, run, run_in_turns


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
