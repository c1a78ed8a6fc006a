"""Real gloo gangs under plain torchrun where one rank hangs outside a collective: each rank's
watchdog records its stacks, and the card names the culprit and the ranks waiting for it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.analysis import analyse
from traincard_otel._read.payload.gang import gang_section

from tests.support.helpers import REPO, kill_processes_with_env, subprocess_env

SCRIPT = REPO / "tests" / "integration" / "scripts" / "hung_gang.py"
STACKS_COMMAND: dict[str, Any] = {}  # `traincard stacks` run against the live deadlocked gang


class Gang:
    """A running torchrun gang and its store."""

    def __init__(
        self, tmp: Path, scenario: str, nproc: int, culprit: int, backend: str = "gloo", system: bool = False
    ) -> None:
        torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
        if torchrun is None:
            pytest.skip("torchrun is not installed next to this interpreter")
        self.store = tmp / "store"
        self.culprit = culprit
        self.proc = subprocess.Popen(
            [torchrun, f"--nproc_per_node={nproc}", "--max-restarts=0", "--monitor-interval=1", str(SCRIPT)],
            env=subprocess_env(
                TRAINCARD_DIR=str(self.store),
                TRAINCARD_SYSTEM=str(system).lower(),  # (sampled by local rank 0 for the node)
                TRAINCARD_SYSTEM_INTERVAL="0.5",
                TRAINCARD_STALL_TIMEOUT="2",
                TRAINCARD_RANK_TIMEOUT="3",
                TRAINCARD_FLUSH_INTERVAL="0.5",
                HANG_SCENARIO=scenario,
                HANG_CULPRIT=str(culprit),
                HANG_BACKEND=backend,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def run_dir(self) -> Path:
        return next(self.store.iterdir())

    def section(self) -> Any:
        return gang_section(analyse(traincard_otel.load(self.run_dir())).gang)

    def verdict(self, timeout_s: float = 90) -> Any:
        """The gang section once every rank's stacks are in and the culprit is named."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if self.proc.poll() is not None:
                raise AssertionError(f"the gang ended: {self.proc.stdout.read()[-3000:]}")  # type: ignore[union-attr]
            if not self.store.exists() or not any(self.store.iterdir()):
                continue
            section = self.section()
            first = (section or {}).get("first_failure") or {}
            if first.get("culprit") and len(first.get("consequences") or []) == section["world_size"] - 1:
                return section
        raise AssertionError(f"no verdict naming the culprit in {timeout_s} s: {self.section()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        kill_processes_with_env("TRAINCARD_DIR", str(self.store))  # the ranks, in sessions of their own


@pytest.fixture(scope="module")
def gangs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Gang, Any]]]:
    """Three gangs started together (most of their time is the stall timeouts), each stopped as
    soon as its verdict is in the store."""
    started = {
        scenario: Gang(tmp_path_factory.mktemp(scenario), scenario, nproc, culprit, system=system)
        for scenario, nproc, culprit, system in (
            ("sleep", 2, 1, True),
            ("deadlock", 2, 1, False),
            ("skip", 4, 2, False),
        )
    }
    out: dict[str, tuple[Gang, Any]] = {}
    try:
        for scenario, gang in started.items():
            out[scenario] = (gang, gang.verdict())
            if scenario == "deadlock":  # asked while it hangs: where every rank is now
                STACKS_COMMAND["out"] = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "traincard_otel",
                        "stacks",
                        str(gang.run_dir()),
                        "--timeout",
                        "30",
                    ],
                    env=subprocess_env(),
                    capture_output=True,
                    text=True,
                    timeout=90,
                )
                STACKS_COMMAND["after"] = gang.section()
            if scenario == "sleep":  # a stalled rank ended by SIGTERM records where it was once more
                pid = next(r["pid"] for r in out[scenario][1]["ranks"] if r["rank"] == gang.culprit)
                os.kill(pid, signal.SIGTERM)
                _wait_for(lambda g=gang: _stacks_reason(g, g.culprit) == "sigterm")
            gang.stop()
        yield out
    finally:
        for gang in started.values():
            gang.stop()


def _stacks_reason(gang: Gang, rank: int) -> str | None:
    run = traincard_otel.load(gang.run_dir())
    states = [s for s in run.states if s["rank"] == rank]
    return (states[-1].get("stacks") or {}).get("reason") if states else None


def _wait_for(check: Any, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError("timed out")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "where"),
    [
        ("sleep", "in fetch_batch at hung_gang.py:"),
        ("deadlock", "in update_cache at hung_gang.py:"),
        ("skip", "in finish at hung_gang.py:"),
    ],
)
def test_the_rank_stuck_outside_the_collective_is_the_first_failure(
    gangs: dict[str, tuple[Gang, Any]], scenario: str, where: str
) -> None:
    gang, section = gangs[scenario]
    first = section["first_failure"]
    assert first["rank"] == gang.culprit and first["hung"] and first["culprit"]
    assert where in first["how"] and "not in a collective" in first["how"]
    others = sorted(c["rank"] for c in first["consequences"])
    assert others == [r for r in range(section["world_size"]) if r != gang.culprit]
    for c in first["consequences"]:
        assert c["how"].startswith("waiting in all_reduce at hung_gang.py:"), c
        assert c["how"].endswith(f"for rank {gang.culprit}"), c
    stacks = section["stacks"]
    assert stacks["culprits"] == [gang.culprit] and stacks["collective"] == "all_reduce"
    culprit_group, waiting_group = stacks["groups"]  # the culprit first; the others share one stack
    assert culprit_group["ranks"] == [gang.culprit] and culprit_group["culprit"]
    assert waiting_group["ranks"] == others and waiting_group["where"].startswith("waiting in all_reduce")
    banner = next(b["text"] for b in section["headline"] if b["text"].startswith("Where each rank is"))
    assert f"rank {gang.culprit}: {where}" in banner
    assert section["failure"]["verdict"]["text"].startswith("Hung outside a collective")
    if scenario == "sleep":  # the hung rank samples nothing; its node's sampler (rank 0) did
        assert "system.cpu.utilization" in section["failure"]["last_system"]
    by_rank = {r["rank"]: r for r in section["ranks"]}
    assert by_rank[gang.culprit]["where"].startswith(where)
    main = culprit_group["threads"][0]  # the user's threads, the main one first; traincard's apart
    assert main["main"] and not any(t["name"].startswith("traincard-") for t in culprit_group["threads"])
    assert {"traincard-watchdog", "traincard-store"} <= {t["name"] for t in culprit_group["own_threads"]}
    assert all(set(f) == {"file", "line", "func"} for f in main["frames"])  # code locations only
    # PyTorch's flight recorder (gloo here), on by default: the culprit has not joined
    recorded = stacks["flight_recorder"]
    assert recorded["not_joined"] == [gang.culprit] and recorded["pending"]["op"] == "all_reduce"
    lags = {r["rank"]: r["seq"] for r in recorded["ranks"]}
    assert lags[gang.culprit] == recorded["pending"]["seq"] - 1
    assert any(e.startswith("flight recorder: ") for e in first["evidence"])


@pytest.mark.slow
def test_the_deadlocked_helper_thread_is_recorded_too(gangs: dict[str, tuple[Gang, Any]]) -> None:
    _gang, section = gangs["deadlock"]
    group = section["stacks"]["groups"][0]
    helper = next(t for t in group["threads"] if t["name"] == "cache-writer")
    assert helper["frames"][0]["func"] == "update_cache" and not helper["main"]


@pytest.mark.slow
def test_a_stalled_rank_ended_by_sigterm_records_its_place_once_more(
    gangs: dict[str, tuple[Gang, Any]],
) -> None:
    gang, _section = gangs["sleep"]
    run = traincard_otel.load(gang.run_dir())
    dumps = [e for e in run.events if e["name"] == "traincard.rank.stack" and e["rank"] == gang.culprit]
    reasons = [e["attributes"]["traincard.stack.reason"] for e in dumps]
    assert reasons[0] == "stall" and reasons[-1] == "sigterm"
    last = dumps[-1]
    assert last["attributes"]["traincard.stack.where"].startswith("in fetch_batch at hung_gang.py:")
    main = next(t for t in last["body"]["threads"] if t["main"])
    assert main["frames"][0]["func"] == "fetch_batch"  # the handler's own frames are not in it
    assert len(json.dumps(last["body"])) <= 12_000


@pytest.mark.slow
def test_traincard_stacks_against_the_live_hung_gang(gangs: dict[str, tuple[Gang, Any]]) -> None:
    out = STACKS_COMMAND["out"]
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "2 of 2 running ranks answered"
    assert lines[1].startswith("rank 1: in update_cache at hung_gang.py:")  # the culprit first
    assert any(line.startswith("rank 0: waiting in all_reduce at hung_gang.py:") for line in lines)
    # the answers replaced the stall dumps in the ranks' states: they still judge (stalled ranks)
    after = STACKS_COMMAND["after"]
    assert after["first_failure"]["rank"] == 1 and after["stacks"]["culprits"] == [1]
    assert {g["reason"] for g in after["stacks"]["groups"]} <= {"request", "stall"}


def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.slow
@pytest.mark.skipif(_gpus() < 2, reason="needs two CUDA GPUs (NCCL gives each rank its own)")
def test_nccl_gang_names_the_culprit_and_the_flight_recorder_says_who_has_not_joined(tmp_path: Path) -> None:
    gang = Gang(tmp_path, "sleep", 2, 1, backend="nccl")
    try:
        section = gang.verdict()
    finally:
        gang.stop()
    first = section["first_failure"]
    assert first["rank"] == 1 and first["how"].startswith("hung in fetch_batch at hung_gang.py:")
    recorded = section["stacks"]["flight_recorder"]
    assert recorded["not_joined"] == [1] and recorded["pending"]["op"] == "all_reduce"
    assert {r["rank"] for r in recorded["ranks"]} == {0, 1}
