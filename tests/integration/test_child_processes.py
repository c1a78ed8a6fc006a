"""A child process is not a rank: DataLoader workers (fork, spawn, forkserver), a ``multiprocessing``
pool and a subprocess start no telemetry of their own, export no stale copy of the parent's
figures and write nothing into its store, while what they print reaches the card's logs.

Each case runs ``scripts/child_processes.py`` as a user's training script (console capture and the
system sampler on, short intervals) and reads the store it wrote, raw, before the reader's own
sorting could hide anything.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._schema import Event
from traincard_otel._store import layout, part_format, segment

from tests.support.helpers import REPO, subprocess_env

pytest.importorskip("torch")

SCRIPT = REPO / "tests" / "integration" / "scripts" / "child_processes.py"
INTERVAL_S = 0.2


def run_script(mode: str, store: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), mode],
        env=subprocess_env(
            TRAINCARD_DIR=str(store.parent),
            TRAINCARD_RUN_NAME=store.name,  # (the store is read raw: its run's folder, by name)
            TRAINCARD_SYSTEM_INTERVAL=str(INTERVAL_S),
            TRAINCARD_FLUSH_INTERVAL=str(INTERVAL_S),
        ),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parent = re.search(r"^parent (\d+)$", proc.stdout, re.M)
    assert parent, proc.stdout[-2000:]
    return int(parent.group(1)), proc.stdout


def raw_system_points(store: Path, writer: Path) -> dict[str, list[float]]:
    """Each system series' stored times, in the order the writer wrote them: its segments and the
    parts it compacted them into (a slow machine can write enough segments for a part)."""
    names = ((layout.parse(str(path.relative_to(store))), path) for path in writer.iterdir())
    named = [(name, path) for name, path in names if name is not None]
    out: dict[str, list[float]] = {}
    for name, path in sorted(n for n in named if n[0].kind in ("segment", "part")):  # by first segment
        if name.kind == "part":
            rest = part_format.read_parquet(path.read_bytes(), ["rest"])["rest"].to_pylist()
            data = "".join(f"{line}\n" for line in rest if line is not None).encode()
        else:
            data = path.read_bytes()
        records, corrupt = segment.decode(data)
        assert not corrupt
        for rec in records:
            if rec.get("k") == "x":
                key = rec["n"] + repr(sorted((rec.get("a") or {}).items()))
                out.setdefault(key, []).append(rec["t"])
    return out


def check_one_writer_and_clean_series(store: Path, parent: int) -> traincard_otel.RunData:
    writers = sorted({(p.attempt, p.rank, p.writer) for n in _names(store) if (p := layout.parse(n))})
    rank0 = [w for w in writers if w[1] == 0]
    assert len(rank0) == 1, writers  # only the parent wrote rank 0's files
    writer = store / layout.writer_dir(*rank0[0])
    run = traincard_otel.load(store)
    (state,) = [s for s in run.states if s["rank"] == 0]
    assert state["pid"] == parent and state["status"] == "finished"
    ended = {Event.run_ended(status) for status in ("finished", "terminated")}
    ends = [e["name"] for e in run.events if e["rank"] == 0 and e["name"] in ended]
    assert ends == [Event.run_ended("finished")]  # a child shutting its copy down would end it again
    points = raw_system_points(store, writer)
    assert points and any(k.startswith("system.cpu.utilization") for k in points)
    for key, times in points.items():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        # One sample per interval, strictly in time: a stale stream (a forked child exporting the
        # parent's figures as of the fork) interleaves out of order or between two real samples.
        assert all(g >= INTERVAL_S / 2 for g in gaps), (key, gaps)
        span = times[-1] - times[0]
        assert len(times) <= span / INTERVAL_S + 2, (key, len(times), span)
    assert "child_metric" not in run.metrics  # a child's own report went nowhere
    return run


def _names(store: Path) -> list[str]:
    return [str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()]


def child_lines(run: traincard_otel.RunData) -> tuple[set[str], list[str]]:
    """Pids of the children whose hello is in the parent's logs, and what they said about reporting."""
    messages = [str(log["message"]) for log in run.logs if log["rank"] == 0]
    hellos = {m.split()[1] for m in messages if re.fullmatch(r"child \d+ says hello", m)}
    enabled = [m.rsplit("=", 1)[1] for m in messages if re.fullmatch(r"child \d+ reporter enabled=\w+", m)]
    return hellos, enabled


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_start_no_telemetry_and_their_prints_reach_the_logs(
    method: str, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    parent, _stdout = run_script(f"dataloader-{method}", store)
    run = check_one_writer_and_clean_series(store, parent)
    hellos, enabled = child_lines(run)
    assert len(hellos) == 2 and str(parent) not in hellos  # both workers, as the parent's console
    assert enabled == ["False", "False"]
    assert run.step_times[0].steps == list(range(1, 19))


@pytest.mark.slow
def test_a_multiprocessing_pool_starts_no_telemetry(tmp_path: Path) -> None:
    store = tmp_path / "store"
    parent, _stdout = run_script("pool", store)
    run = check_one_writer_and_clean_series(store, parent)
    hellos, enabled = child_lines(run)
    assert len(hellos) >= 1 and enabled and set(enabled) == {"False"}


@pytest.mark.slow
def test_a_subprocess_is_no_rank_unless_launched_as_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    parent, _stdout = run_script("subprocess", store)
    run = check_one_writer_and_clean_series(store, parent)
    hellos, enabled = child_lines(run)
    # The plain child reports nothing; the one started with its own rank variables is rank 1.
    assert len(hellos) == 2 and enabled == ["False", "True"]
    assert {s["rank"] for s in run.states} == {0, 1}


@pytest.mark.slow
def test_hf_trainer_with_dataloader_workers_stores_one_clean_system_stream(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported case: HF Trainer with ``dataloader_num_workers=2`` (fork, the default)."""
    pytest.importorskip("transformers")
    from examples.tiny_gpt2 import trainer as make_trainer

    monkeypatch.setenv("TRAINCARD_SYSTEM", "true")
    monkeypatch.setenv("TRAINCARD_SYSTEM_INTERVAL", str(INTERVAL_S))
    monkeypatch.setenv("TRAINCARD_FLUSH_INTERVAL", str(INTERVAL_S))
    trainer = make_trainer(
        str(tmp_path / "out"), max_steps=12, dataloader_num_workers=2, eval_strategy="no", save_strategy="no"
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()
    run = check_one_writer_and_clean_series(store_dir, os.getpid())
    assert run.step_times[0].steps == list(range(1, 13))
