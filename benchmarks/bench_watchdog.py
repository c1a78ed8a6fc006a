"""The watchdog's cost: training with it running and without (healthy), and one stack dump.

    python -m benchmarks.bench_watchdog [--steps 1000000] [--rounds 6] [--quick] [--json out.json]

Healthy: each round runs ``steps`` steps of pure-Python work with a step end each (the training
thread's CPU and wall time), once with a watchdog thread checking every second as a pipeline runs
it and once without, in ABBA order. The watchdog only reads stacks when the rank stalls, so the
two rows should match. Dump: the CPU time of one dump (``sys._current_frames()`` of 17 threads
with 200-frame stacks, bounded and encoded) and its size; 64 ranks' dumps are 64 times the bytes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import interleave, report, spread


def _train(steps: int, watchdog: bool) -> float:
    from traincard_otel._schema import StepEnd
    from traincard_otel._write.queue import ReportQueue
    from traincard_otel._write.telemetry.health import Watchdog

    queue = ReportQueue()
    dog = None
    if watchdog:
        dog = Watchdog(
            progress=lambda: (queue.step, queue.heartbeat_at),
            recent_step_times=lambda: [0.001] * 20,
            recent_wait_shares=list,
            gpu_utilization=list,
            emit=lambda *_args: None,
            backend=None,
            rank=0,
            world_size=2,
            attempt=0,
            period_s=1.0,  # as the pipeline runs it
        ).start()
    try:
        start = time.perf_counter()
        x = 0
        for step in range(1, steps + 1):
            for i in range(20):
                x += i * step
            queue.put(StepEnd(time.time(), step, 0.001, None, None, 0.0))
            queue.step = step  # what Reporter.step_end sets, and the watchdog reads
            if step % 10_000 == 0:
                queue.drain()
        return time.perf_counter() - start
    finally:
        if dog is not None:
            dog.stop()


def _dump_cost(rounds: int) -> tuple[float, int]:
    from traincard_otel._write.telemetry import stacks

    stop = threading.Event()

    def deep(n: int) -> None:
        if n:
            deep(n - 1)
        else:
            stop.wait()

    threads = [threading.Thread(target=deep, args=(200,), daemon=True) for _ in range(16)]
    for t in threads:
        t.start()
    try:
        cpu = []
        size = 0
        for _ in range(rounds):
            start = time.thread_time()
            dump = stacks.capture("stall", 0)
            size = len(json.dumps(dump).encode())
            cpu.append(time.thread_time() - start)
        return statistics.median(cpu), size
    finally:
        stop.set()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Training time per 100k steps with the watchdog on and off, their ratio, and one dump's cost."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    steps, rounds = (5000, 2) if args.quick else (args.steps, args.rounds)
    times = interleave(
        {"watchdog on": lambda: _train(steps, True), "watchdog off": lambda: _train(steps, False)}, rounds
    )
    rows: list[dict[str, Any]] = [
        {"case": name, "ms / 100k steps": spread([1e5 * 1000 * t / steps for t in values])["median"]}
        for name, values in times.items()
    ]
    on, off = (statistics.median(times[k]) for k in ("watchdog on", "watchdog off"))
    rows.append({"case": "on / off", "ms / 100k steps": on / off})
    cpu, size = _dump_cost(3 if args.quick else 20)
    rows.append({"case": "one dump: CPU ms", "ms / 100k steps": 1000 * cpu})
    rows.append({"case": "one dump: KB (x64 ranks)", "ms / 100k steps": size * 64 / 1000})
    return report("bench_watchdog", rows, None, args.json, steps=steps)


if __name__ == "__main__":
    main()
