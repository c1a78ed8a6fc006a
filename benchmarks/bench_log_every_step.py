"""Logging every step, as a user runs it: one process per run, instrumented or not.

    python -m benchmarks.bench_log_every_step [--pairs 20] [--steps 600] [--malloc fixed|default] [--slice K]
                                              [--layout random|fixed] [--quick] [--json F]
    python -m benchmarks.bench_log_every_step --plain-pairs [--pairs 20] [--layout random|fixed] ...
    python -m benchmarks.bench_log_every_step --pool RUN.json [RUN.json ...] [--json F]
    python -m benchmarks.bench_log_every_step --attribute [--rounds 4] [--before DIR] [--json F]
    python -m benchmarks.bench_log_every_step --instructions [--steps 45 --skip 15] [--json F]
    python -m benchmarks.bench_log_every_step --calls [--variants ...] [--json F]
    python -m benchmarks.bench_log_every_step --converter [--rounds 4] [--before DIR] [--json F]

An HF Trainer on a tiny GPT-2 logs every step with its printer callback, so every step prints a
line; each run is a fresh process, the plain script or the same script with
``traincard_otel.instrument(trainer)`` and every default. One module per mode, on one harness
(``benchmarks/log_every_step/``): the harness runs the processes, back to back or taking turns
(``harness``: ``--slice``, ``--malloc``, ``--layout``, ``--intervals``); the modes are the pairs of
an instrumented and a plain process (the default, and ``--pool`` over earlier runs: ``pairs``),
pairs of two plain processes (``plain``), where the time goes by thread (``attribution``), the
training thread's instructions under callgrind (``instructions``), its calls, collections and
system calls (``calls``) and the converter's CPU per step (``converter``). Each module's docstring
says how its figures are made.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import report
from benchmarks.log_every_step.attribution import attribute
from benchmarks.log_every_step.calls import calls
from benchmarks.log_every_step.converter import converter
from benchmarks.log_every_step.harness import FIXED_MALLOC, LAYOUT, VARIANTS
from benchmarks.log_every_step.instructions import instructions
from benchmarks.log_every_step.pairs import end_to_end, pool, product_code
from benchmarks.log_every_step.plain import plain_pairs


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings every mode's runs share (``log_every_step/harness.py`` says what each does)."""
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--skip", type=int, default=100)
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


def run_settings(args: argparse.Namespace) -> tuple[dict[str, str], str]:
    """The environment every run gets from ``args`` (heap settings, layout) and the design's name."""
    env = dict(FIXED_MALLOC) if args.malloc == "fixed" else {}
    if args.layout == "random":
        env[LAYOUT] = "random"
    design = f"turns of {args.slice} steps" if args.slice else "back to back"
    design += ", random heap layout" if args.layout == "random" else ""
    return env, design


def check_slice(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Turns must end where the warm-up does."""
    if args.slice < 0 or (args.slice and args.skip % args.slice):
        parser.error(f"--slice {args.slice}: give a K that divides --skip ({args.skip}), or 0 (back to back)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--attribute", action="store_true", help="per-thread CPU of each variant")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=list(VARIANTS),
        choices=list(VARIANTS),
        help="with --attribute or --calls",
    )
    parser.add_argument(
        "--before", type=Path, help="with --attribute or --converter: an older checkout, as one more case"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="the training thread's instructions, under callgrind"
    )
    parser.add_argument(
        "--calls", action="store_true", help="the training thread's calls, collections and system calls"
    )
    parser.add_argument(
        "--plain-pairs", action="store_true", help="pairs of two plain processes: the spread with no tracker"
    )
    parser.add_argument("--pool", nargs="+", metavar="RUN.json", help="the figures over earlier runs' pairs")
    parser.add_argument(
        "--converter", action="store_true", help="the converter's CPU per step, in a process of its own"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
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
    check_slice(parser, args)  # (the modes above run no turns)
    env, design = run_settings(args)
    if args.calls:  # one process a case, back to back: counts need neither turns nor repeats
        rows, raw = calls(args.steps, args.skip, args.variants, env)
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return report("log_every_step_calls", rows, columns, args.json, raw=raw)
    if args.plain_pairs:
        rows, raw = plain_pairs(args.pairs, args.steps, args.skip, env, args.slice)
        rows = [{"malloc": args.malloc, "design": design, **row} for row in rows]
        return report("log_every_step_plain_pairs", rows, None, args.json, raw=raw)
    scaled = args.intervals == "scaled"
    if args.attribute:
        rows, raw = attribute(
            args.rounds, args.steps, args.skip, args.before, args.variants, env, args.slice, scaled
        )
        columns = list(dict.fromkeys(key for row in rows for key in row))  # threads of every case
        return report("log_every_step_attribution", rows, columns, args.json, raw=raw)
    code = product_code()
    rows, raw = end_to_end(args.pairs, args.steps, args.skip, env, args.slice, scaled)
    design += ", timers scaled" if args.slice and scaled else ""
    rows = [{"malloc": args.malloc, "design": design, **row} for row in rows]
    return report("log_every_step", rows, None, args.json, raw=raw, code=code)


if __name__ == "__main__":
    main()
