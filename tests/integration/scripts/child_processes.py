"""A training loop whose helpers run in child processes: ``python child_processes.py MODE``.

MODE: ``dataloader-fork``, ``dataloader-spawn``, ``dataloader-forkserver`` (a real ``DataLoader``
with two persistent workers), ``pool`` (a ``multiprocessing`` pool, fork), ``subprocess`` (a plain
child interpreter, then one launched as rank 1 of 2). The parent reports with the system sampler
on; every child prints ``child <pid> says hello`` and tries to report on its own, printing
``child <pid> reporter enabled=<bool>``. The parent prints ``parent <pid>`` first.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import traincard_otel

ITEMS, ITEM_S, EPOCHS = 12, 0.04, 3


def child_reports() -> None:
    """What a user's child process might do: set up telemetry, report, print."""
    reporter = traincard_otel.Reporter()
    reporter.metrics({"child_metric": 1.0}, step=1)
    say(f"child {os.getpid()} says hello")
    say(f"child {os.getpid()} reporter enabled={reporter.enabled}")


def say(line: str) -> None:
    """One write per line. Unbuffered (``PYTHONUNBUFFERED``, as Metaflow and CI run), ``print``
    writes the text and its newline separately, and two children's lines then interleave on the
    shared pipe ("child 1 says hellochild 2 says hello"), on a terminal as in the card's logs."""
    os.write(1, f"{line}\n".encode())


class Items(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(ITEM_S)  # workers live through several sampling intervals
        return torch.full((4,), float(index))


def worker_init(_worker_id: int) -> None:
    child_reports()


def pool_task(n: int) -> int:
    time.sleep(0.3)
    if n < 2:
        child_reports()
    return n * n


SUBPROCESS = "import traincard_otel, child_processes; child_processes.child_reports()"


def main(mode: str) -> None:
    print(f"parent {os.getpid()}", flush=True)
    reporter = traincard_otel.Reporter()
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0

    def train_on(batch: torch.Tensor) -> None:
        nonlocal step
        loss = model(batch).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        reporter.step_end(step, duration_s=0.01)
        reporter.metrics({"loss": float(loss.detach())})

    if mode.startswith("dataloader-"):
        loader = DataLoader(
            Items(),
            batch_size=2,
            num_workers=2,
            persistent_workers=True,
            worker_init_fn=worker_init,
            multiprocessing_context=mode.removeprefix("dataloader-"),
        )
        for _epoch in range(EPOCHS):
            for batch in loader:
                train_on(batch)
        del loader  # the workers exit here, while the parent still reports
    elif mode == "pool":
        with multiprocessing.get_context("fork").Pool(2) as pool:
            squares = pool.map_async(pool_task, range(6))
            while not squares.ready():
                train_on(torch.randn(2, 4))
                time.sleep(0.05)
            assert squares.get() == [n * n for n in range(6)]
    elif mode == "subprocess":
        here = os.path.dirname(os.path.abspath(__file__))
        env = {**os.environ, "PYTHONPATH": here}
        subprocess.run([sys.executable, "-c", SUBPROCESS], env=env, check=True)
        ranked = {**env, "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}  # as a launcher starts one
        subprocess.run([sys.executable, "-c", SUBPROCESS], env=ranked, check=True)
        for _ in range(10):
            train_on(torch.randn(2, 4))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    time.sleep(0.5)  # the parent samples on after its children have gone
    reporter.close()


if __name__ == "__main__":
    main(sys.argv[1])
