"""``traincard`` command line: render, ls, tail and export a task's telemetry store.

traincard render <dir|Flow/run/step/task> -o card.html
traincard ls <target>
traincard tail <target> [-n 20]
traincard export <target> [--format csv|jsonl] [-o file]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ._load import load


def _render(args: argparse.Namespace) -> int:
    from .card.render import render_data, write_card

    html = render_data(load(args.target), live=False, final=True, hourly_cost=args.hourly_cost)
    write_card(args.output, html)
    print(f"wrote {args.output} ({len(html) / 1024:.0f} KiB)")
    return 0


def _ls(args: argparse.Namespace) -> int:
    data = load(args.target)
    print(f"{data.source}: {data.stats.get('segments', 0)} segments, {data.stats.get('records', 0)} records")
    for st in sorted(data.states, key=lambda s: (s.get("attempt", 0), s.get("rank", 0))):
        print(
            f"  attempt {st.get('attempt')} rank {st.get('rank')} writer {st.get('writer')}: "
            f"{st.get('status')} step {st.get('step')} host {st.get('host')}"
        )
    for name, series in sorted(data.metrics.items()):
        print(
            f"  metric {name}: {len(series)} points, last {series.values[-1]:.6g} at step {series.steps[-1]}"
        )
    return 0


def _tail(args: argparse.Namespace) -> int:
    data = load(args.target)
    st = data.status
    print(f"{data.source}: {st.get('status')} phase={st.get('phase')} step={st.get('step')}")
    for name, value in sorted((st.get("last_metrics") or {}).items()):
        print(f"  {name} = {value:.6g}")
    for line in sorted(data.logs, key=lambda r: r["time"])[-args.n :]:
        print(f"  [{line['level']}] rank {line['rank']}: {line['message']}")
    return 0


def _rows(data: Any) -> list[dict[str, Any]]:
    rows = []
    for name, s in sorted(data.metrics.items()):
        for i in range(len(s)):
            rows.append(
                {
                    "metric": name,
                    "step": s.steps[i],
                    "value": s.values[i],
                    "time": s.times[i],
                    "attempt": s.attempts[i],
                    "rank": s.ranks[i],
                }
            )
    return rows


def _export(args: argparse.Namespace) -> int:
    rows = _rows(load(args.target))
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="") as fh:
            _write_rows(rows, args.format, fh)
    else:
        _write_rows(rows, args.format, sys.stdout)
    return 0


def _write_rows(rows: list[dict[str, Any]], fmt: str, out: TextIO) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=["metric", "step", "value", "time", "attempt", "rank"])
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``traincard`` command."""
    parser = argparse.ArgumentParser(prog="traincard", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("render", help="write the card of a store directory or a Metaflow task")
    p.add_argument("target")
    p.add_argument("-o", "--output", default="traincard.html")
    p.add_argument("--hourly-cost", type=float, default=None)
    p.set_defaults(fn=_render)
    p = sub.add_parser("ls", help="list attempts, ranks and metric series")
    p.add_argument("target")
    p.set_defaults(fn=_ls)
    p = sub.add_parser("tail", help="status, last metrics and the log tail")
    p.add_argument("target")
    p.add_argument("-n", type=int, default=20)
    p.set_defaults(fn=_tail)
    p = sub.add_parser("export", help="every metric point as CSV or JSON lines")
    p.add_argument("target")
    p.add_argument("--format", choices=["csv", "jsonl"], default="csv")
    p.add_argument("-o", "--output", default=None)
    p.set_defaults(fn=_export)
    args = parser.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    raise SystemExit(main())
