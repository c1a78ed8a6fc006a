"""Run every benchmark: ``python -m benchmarks [--quick] [--json benchmarks/results/latest.json]``."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import time
import traceback
from pathlib import Path
from typing import Any

import benchmarks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="tiny configurations: checks that everything runs"
    )
    parser.add_argument("--only", nargs="*", default=None, help="benchmark module names (bench_hot_path ...)")
    parser.add_argument("--json", default=str(Path(benchmarks.__file__).parent / "results" / "latest.json"))
    args = parser.parse_args()
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    results: dict[str, Any] = {}
    for name in names:
        if args.only and name not in args.only:
            continue
        print(f"\n== {name}")
        t0 = time.perf_counter()
        try:
            results[name] = importlib.import_module(f"benchmarks.{name}").main(
                ["--quick"] if args.quick else []
            )
        except Exception:
            traceback.print_exc()
            results[name] = {"error": traceback.format_exc(limit=3)}
        print(f"({time.perf_counter() - t0:.0f} s)")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    print(f"\nraw numbers: {args.json}")


if __name__ == "__main__":
    main()
