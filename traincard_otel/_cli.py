"""``traincard``: render, list, tail and export the telemetry of training runs; ask live ranks
where they are (``stacks``) and for a profile of their next steps (``profile``).

A target is a run's folder, a folder holding several runs (the newest is used, and named), a
store URL (s3://bucket/prefix/run, gs://..., az://...), or a Metaflow pathspec: Flow, Flow/run,
Flow/run/step or Flow/run/step/task, with ``latest`` for the run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from . import _cli_ask
from ._read import locate as _targets
from ._read.load.reader import RunData
from ._read.run import load
from ._read.sweep import Sweep, sweep
from .exceptions import TraincardError

EXAMPLES = """examples:
  traincard ls traincard-data                      runs, steps, tasks, attempts and ranks in a folder
  traincard ls FinetuneFlow/latest                 the same for a Metaflow run
  traincard render FinetuneFlow/latest/train -o card.html   (a foreach step: its branches compared)
  traincard render FinetuneFlow --last 5           the training step of the flow's last 5 runs compared
  traincard render s3://bucket/runs/exp-7 --watch  rewrite card.html every few seconds while it runs
  traincard tail FinetuneFlow/1763/train/2 -n 50   status, last metrics and the log tail
  traincard export traincard-data --format parquet -o metrics.parquet
  traincard stacks s3://bucket/runs/exp-7           where every running rank is now, grouped by stack
  traincard profile s3://bucket/runs/exp-7 --steps 5  torch.profiler on every running rank, traces saved
  traincard export traincard-data --profile latest -o trace.json.gz  a capture's trace, for Perfetto
"""


def _note(message: str) -> None:
    print(f"traincard: {message}", file=sys.stderr)


def _pick(target: str) -> object:
    """What to read for ``target``; says on stderr which run it took when there were several."""
    found, others = _targets.resolve_one(target)
    if others:
        _note(
            f"{len(others) + 1} runs under {target}; using the newest, {found.label} (traincard ls {target})"
        )
    return found.target


def _comparison(args: argparse.Namespace) -> Sweep | None:
    """The tasks ``render`` compares: a flow's last runs (``--last``), or the several tasks of a
    step (a foreach; a gang is one task); None for one run."""
    if args.last is not None:
        return sweep(args.target, last=args.last)
    found = _targets.resolve(args.target)
    if len(found) > 1 and _targets.is_pathspec(args.target):
        return Sweep(args.target, found)
    return None


def _render_comparison(args: argparse.Namespace, compared: Sweep) -> int:
    from ._read.card.render import render_comparison

    while True:
        html = render_comparison(compared.summaries, compared.title, final=not args.watch)
        write_card(args.output, html)
        running = sum(1 for s in compared.summaries.values() if s.get("status") in (None, "running"))
        print(f"wrote {args.output} ({len(html) / 1024:.0f} KiB, {len(compared)} tasks compared)", flush=True)
        if not args.watch or not running:
            return 0
        time.sleep(args.interval)
        compared = _comparison(args) or compared


def _render(args: argparse.Namespace) -> int:
    from ._read.render import render_target

    compared = _comparison(args)
    if compared is not None:
        return _render_comparison(args, compared)
    target = _pick(args.target)
    # A Metaflow task's card compares with the last good run, as its card in Metaflow does.
    baseline = args.baseline or ("auto" if not isinstance(target, (str, os.PathLike)) else None)
    while True:
        card = render_target(
            target,
            final=not args.watch,
            hourly_cost=args.hourly_cost,
            baseline=None if baseline == "none" else baseline,
        )
        write_card(args.output, card.html)
        print(
            f"wrote {args.output} ({len(card.html) / 1024:.0f} KiB, {card.status or 'no status'})", flush=True
        )
        if not args.watch or card.status not in (None, "running"):
            return 0
        time.sleep(args.interval)


def _describe(data: RunData) -> list[str]:
    lines = []
    for st in sorted(data.states, key=lambda s: (s.get("attempt", 0), s.get("rank", 0))):
        lines.append(
            f"    attempt {st.get('attempt')} rank {st.get('rank')}: {st.get('status')} "
            f"step {st.get('step')} on {st.get('host')}"
        )
    for name, series in sorted(data.metrics.items()):
        if len(series):
            lines.append(
                f"    {name}: {len(series)} points, last {series.values[-1]:.6g} at step {series.steps[-1]}"
            )
    return lines


def _ls(args: argparse.Namespace) -> int:
    found = _targets.resolve(args.target)
    if not found:
        raise _targets.TargetError(f"no traincard telemetry under {args.target!r}")
    for item in found:
        data = load(item.target)
        ranks = sorted({int(s.get("rank", 0)) for s in data.states})
        status = data.status.get("status", "no status")
        print(f"{item.label}  {status}, attempts {data.attempts or [0]}, ranks {ranks or [0]}")
        if args.verbose or len(found) == 1:
            print("\n".join(_describe(data)))
    return 0


def _tail(args: argparse.Namespace) -> int:
    data = load(_pick(args.target))
    st = data.status
    phase = f" phase={st['phase']}" if st.get("phase") else ""  # (none open once a run ended)
    print(f"{data.source}: {st.get('status')}{phase} step={st.get('step')}")
    for name, value in sorted((st.get("last_metrics") or {}).items()):
        print(f"  {name} = {value:.6g}")
    for line in sorted(data.logs, key=lambda r: r["time"])[-args.n :]:
        print(f"  [{line['level']}] rank {line['rank']}: {line['message']}")
    return 0


def _stacks(args: argparse.Namespace) -> int:
    return _cli_ask.stacks(args, _pick)


def _profile(args: argparse.Namespace) -> int:
    return _cli_ask.profile(args, _pick)


_COLUMNS = ["metric", "step", "value", "time", "attempt", "rank"]


def _export(args: argparse.Namespace) -> int:
    target = _pick(args.target)
    data = load(target)
    if args.profile is not None:
        if not args.output:
            raise _targets.TargetError("--profile writes the trace to a file: add -o trace.json.gz")
        what = _cli_ask.export_trace(
            _targets.backend_for(target)[0], data, args.profile, args.rank, args.output
        )
        print(f"wrote {args.output} ({what}); open it in https://ui.perfetto.dev")
        return 0
    if args.format == "parquet":
        if not args.output:
            raise _targets.TargetError("--format parquet writes a file: add -o metrics.parquet")
        import pyarrow.parquet as pq

        pq.write_table(data.to_arrow("metrics"), args.output)
        return 0
    rows = data.to_rows("metrics")
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="") as fh:
            _write_rows(rows, args.format, fh)
    else:
        _write_rows(rows, args.format, sys.stdout)
    return 0


def _write_rows(rows: list[dict[str, object]], fmt: str, out: TextIO) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="traincard",
        description=(__doc__ or "").split("\n\n")[0],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(
        name: str, help_text: str, fn: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, help=help_text, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        p.add_argument(
            "target", help="a run's folder, a folder of runs, s3://..., or Flow[/run[/step[/task]]]"
        )
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.set_defaults(fn=fn)
        return p

    p = command("render", "write the card of a run as one HTML file", _render)
    p.add_argument("-o", "--output", default="traincard.html", type=Path)
    p.add_argument("--watch", action="store_true", help="rewrite the file while the run is live")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between rewrites (--watch)")
    p.add_argument("--hourly-cost", type=float, default=None)
    p.add_argument(
        "--last",
        type=int,
        default=None,
        metavar="N",
        help="compare the last N runs of a flow (the target)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="run to compare with: Flow/run/step, a run id, a store folder, or none "
        "(default: the last good run, for a Metaflow task)",
    )
    p = command("ls", "list runs, steps, tasks, attempts and ranks", _ls)
    p.add_argument("-v", "--verbose", action="store_true", help="also each run's ranks and metrics")
    p = command("tail", "status, last metrics and the log tail", _tail)
    p.add_argument("-n", type=int, default=20)
    p = command("export", "every metric point as CSV, JSON lines or Parquet; or a profile's trace", _export)
    p.add_argument("--format", choices=["csv", "jsonl", "parquet"], default="csv")
    p.add_argument("-o", "--output", default=None)
    p.add_argument(
        "--profile", default=None, metavar="ID", help="copy this profile capture's trace (or latest)"
    )
    p.add_argument(
        "--rank", type=int, default=None, help="the rank whose trace --profile copies (default: lowest)"
    )
    p = command("stacks", "ask the running ranks where they are; print their stacks grouped", _stacks)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the ranks' answers")
    p.add_argument("--all-threads", action="store_true", help="every thread, not only the main one")
    p = command(
        "profile", "profile the next steps of the running ranks (torch.profiler); save their traces", _profile
    )
    p.add_argument("--steps", type=int, default=5, help="steps recorded (after one warm-up step)")
    p.add_argument("--ranks", default="all", help="all, or the ranks to profile: 0,3")
    p.add_argument("--wait", type=float, default=90.0, help="seconds to wait for the captures")
    p.add_argument("--shapes", action="store_true", help="record the operators' input shapes")
    p.add_argument("--stacks", dest="with_stacks", action="store_true", help="record Python stacks")
    return parser


def write_card(path: str | os.PathLike[str], page: str) -> int:
    """Write ``page`` to ``path`` whole or not at all (a temp file beside it, then a rename).

    Returns the bytes written. A failure leaves any earlier file at ``path`` as it was.
    """
    target = Path(path)
    data = page.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(data)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``traincard`` command: errors are one line on stderr, exit code 2."""
    args = _parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if not isinstance(exc, TraincardError):
            message = f"{type(exc).__name__}: {message}"
        _note(f"error: {message} (--debug shows the traceback)")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
