"""The converter's CPU for what an HF run logging and printing every step hands it, in a child
process per round (``--before``: an older checkout's, alternating)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent.parent  # (no import of the benchmarks package: this file is the child too)


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
                cmd = [sys.executable, str(HERE), "--child-converter", "--steps", str(steps)]
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


if __name__ == "__main__":  # the child: --child-converter --steps N --result F
    import argparse

    parser = argparse.ArgumentParser(description="the converter's CPU in one process")
    parser.add_argument("--child-converter", action="store_true", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    child_converter(args.steps, args.result)
