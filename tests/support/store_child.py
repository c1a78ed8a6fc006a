"""Processes that report to a store, for the storage fault tests: one reporting script and a loader.

``python store_child.py report FLAG`` reports a metric every 2 ms (configured by the environment:
``TRAINCARD_DIR``, Metaflow's datastore settings...), prints ``step N`` every 100 steps and the
writer's ``store_health`` every 0.2 s, and once the file FLAG exists prints ``last N`` and simply
returns, without ``close()``. ``python store_child.py load TARGET`` prints what
:func:`traincard_otel.load` reads from TARGET as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

import traincard_otel
from traincard_otel._write import pipeline as _pipeline

_say_lock = threading.Lock()


def say(kind: str, value: object) -> None:
    """One whole line per call: two threads print, and ``print`` writes its parts separately."""
    with _say_lock:
        sys.stdout.write(f"{kind} {value}\n")
        sys.stdout.flush()


def report(flag: str) -> None:
    reporter = traincard_otel.configure()

    def health() -> None:
        while True:
            pipeline: Any = _pipeline.active()
            if pipeline is not None and pipeline.writer is not None:
                say("health", json.dumps(pipeline.writer.store_health))
            time.sleep(0.2)

    threading.Thread(target=health, daemon=True).start()
    step = 0
    while not os.path.exists(flag):
        step += 1
        reporter.metrics({"loss": 1.0 / step}, step=step)
        if step % 100 == 0:
            say("step", step)
        time.sleep(0.002)
    say("last", step)


def load(target: str) -> None:
    run = traincard_otel.load(target)
    loss = run.metrics.get("loss")
    print(
        json.dumps(
            {
                "steps": list(loss.steps) if loss else [],
                "status": run.status.get("status"),
                "states": run.states,
                "stats": {k: v for k, v in run.stats.items() if k != "corrupt_names"},
            },
            default=str,
        )
    )


if __name__ == "__main__":
    {"report": report, "load": load}[sys.argv[1]](sys.argv[2])
