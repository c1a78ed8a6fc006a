"""Runs made by hand for the tests that read them: a run's data in memory, and stores written
through the real :class:`StoreWriter` (a gang laid out as ``@parallel`` nodes write it, a store
whose every text field is hostile)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from traincard_otel._read.load.reader import RunData
from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.gang_markers import write_markers
from traincard_otel._write.store.writer import StoreWriter

from tests.support.helpers import series


def hf_run() -> RunData:
    """What an HF Trainer run stores: loss every 5 steps, eval every 40, the bookkeeping at the end."""
    data = RunData(source="hf")
    data.states = [
        {
            "attempt": 0,
            "rank": 0,
            "status": "finished",
            "step": 150,
            "started_at": 1000.0,
            "updated_at": 1150.0,
            # max_steps=150 over 40 steps per epoch, while num_train_epochs stayed at its default 3
            "progress": {"epoch": 3.75, "num_epochs": 3, "max_steps": 150},
        }
    ]
    data.metrics["loss"] = series("loss", list(range(5, 151, 5)))
    data.metrics["learning_rate"] = series("learning_rate", list(range(5, 151, 5)), 1e-4)
    data.metrics["eval_loss"] = series("eval_loss", [40, 80, 120])
    for name in ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second"):
        data.metrics[name] = series(name, [40, 80, 120], 3.0)
    for name in ("total_flos", "train_runtime", "train_samples_per_second", "train_steps_per_second"):
        data.metrics[name] = series(name, [150], 7.0)
    data.metrics["train_loss"] = series("train_loss", [150], 0.9)
    data.metrics["epoch"] = series("epoch", list(range(5, 151, 5)))
    return data


NOW = time.time()


def _rank(folder: Path, rank: int, node: int, state: dict[str, Any], durations: list[float]) -> None:
    writer = StoreWriter(LocalBackend(folder), attempt=0, rank=rank)
    writer.set_state(
        {
            "status": "running",
            "started_at": NOW - 100,
            "updated_at": NOW - 50,
            "heartbeat_at": NOW - 50,
            "host": f"host{node}",
            "pid": 100 + rank,
            "local_rank": rank % 2,
            "node_rank": node,
            "world_size": 4,
            "rank_timeout_s": 5.0,
            **state,
        }
    )
    if not durations:
        writer.close(5.0)
        return
    steps = list(range(1, len(durations) + 1))
    times = [NOW - 100 + s for s in steps]
    n = len(steps)
    runs = [segment.step_run(steps, times, durations, [0.01] * n, [0] * n, [0] * n)]
    if rank == 0:
        runs.append(segment.metric_run(None, ("loss",), steps, times, [1.0 / s for s in steps]))
    writer.add_many(runs)
    writer.flush_now()
    writer.close(5.0)


def gang_store(
    root: Path,
    states: dict[int, dict[str, Any]],
    agent_failures: list[dict[str, Any]],
    launcher_system: dict[str, float] | None = None,
) -> Path:
    """A two-node gang of two ranks each (rank 2 the slow one), as @parallel nodes lay out their
    stores under one step; ``states`` adds to each rank's state, ``agent_failures`` are the
    elastic agents' records of the ranks they saw fail. Returns the second node's store."""
    step_dir = root / "Flow" / "1" / "train"
    control = LocalBackend(step_dir / "5" / "traincard")
    for node in (0, 1):
        task = "5" if node == 0 else "5_node_1"
        store = step_dir / task / "traincard"
        info = {
            "node_index": node,
            "num_nodes": 2,
            "control_task_id": "5",
            "task_id": task,
            "pathspec": f"Flow/1/train/{task}",
            "host": f"host{node}",
            "launcher_pid": 1,
        }
        write_markers(LocalBackend(store), control, info)
        # The node's step process: its state says how the node looks, it is no training rank.
        launcher = {
            "status": "running",
            "host": f"host{node}",
            "pid": 1,
            "last_system": launcher_system or {},
        }
        _rank(store, node, node, launcher, [])
        for rank in (2 * node, 2 * node + 1):
            _rank(store, rank, node, states.get(rank, {}), [0.1 if rank != 2 else 0.3] * 10)
        agent = {
            "node_rank": node,
            "attempt": 0,
            "host": f"host{node}",
            "started_at": NOW - 120,
            "ended_at": NOW - 40,
            "exit_code": 1,
            "failures": [f for f in agent_failures if f["rank"] // 2 == node],
            "exit_barrier_timeout_s": 300.0,
        }
        LocalBackend(store).write(f"elastic/node-{node}-9.json", json.dumps(agent).encode())
    return step_dir / "5_node_1"


HOSTILE = "bad \ud800 \x00\x07\x1b[31m <script>document.body.dataset.pwned='1'</script>"


def write_hostile_store(root: Path) -> None:
    """A store whose every text field holds a lone surrogate and control characters, written
    straight through the store writer (as an older writer or another tool could leave it)."""

    class FailsOnce(LocalBackend):
        """A store whose first write fails with hostile text in the error message."""

        failed = False

        def write(self, name: str, data: bytes) -> None:
            if not self.failed:
                self.failed = True
                raise OSError(f"err {HOSTILE}")
            super().write(name, data)

    writer = StoreWriter(FailsOnce(root), attempt=0, rank=0)
    writer.set_state(
        {
            "status": "failed",
            "step": 2,
            "started_at": 1.0,
            "updated_at": 3.0,
            "notes": [f"note {HOSTILE}"],
            "failure": {"type": "Error\ud800", "message": f"exc {HOSTILE}", "traceback": f"tb {HOSTILE}"},
            "rejected": {"reason\udfff": 2},
        }
    )
    for step in (1, 2):
        writer.add({"k": "m", "t": float(step), "s": step, "v": {f"loss\ud800\x07{step}": 1.0, "ok": 0.5}})
    writer.add({"k": "m", "t": 2.0, "s": 2, "v": {"tagged": 1.0}, "g": {"tag\udfff": "v\ud800"}})
    writer.add({"k": "l", "t": 2.0, "lvl": "ERROR", "msg": f"log {HOSTILE}", "a": {}})
    writer.add(
        {
            "k": "e",
            "t": 2.0,
            "n": "traincard.checkpoint.saved",
            "a": {"traincard.checkpoint.path": f"/ckpt/{HOSTILE}", "traincard.step": 2},
        }
    )
    assert writer.flush_now() is False  # the hostile error is counted; the next write succeeds
    assert writer.flush_now() is True
