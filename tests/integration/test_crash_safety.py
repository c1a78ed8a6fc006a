"""kill -9 at random moments, dead or blocking storage, and bounded exit on a dead S3 endpoint."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._read.payload import build_payload
from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.writer import StoreWriter

from tests.support.helpers import subprocess_env
from tests.support.s3_server import s3_server

FLUSH = 0.2
# A loop reporting a step every millisecond and printing its step (a line every 10 steps with
# lines=True); LOOP is the whole script.
REPORTING = """
step = 0
while True:
    step += 1
    r.metrics({"loss": 1.0 / step, "lr": 0.1}, step=step)
    r.step_end(step, duration_s=0.001)
    print(step, flush=True)
    if lines and step % 10 == 0:
        r.log(f"line {step}")
    time.sleep(0.001)
"""
LOOP = "import time, traincard_otel\nr, lines = traincard_otel.configure(), False\n" + REPORTING


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_kill_9_loses_at_most_the_last_flush_interval(tmp_path: Path, seed: int) -> None:
    store = tmp_path / "store"
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(
            TRAINCARD_DIR=str(store), TRAINCARD_SYSTEM="false", TRAINCARD_FLUSH_INTERVAL=str(FLUSH)
        ),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "1"
    time.sleep(random.Random(seed).uniform(0.5, 1.5))  # a random phase of five flush intervals
    proc.send_signal(signal.SIGKILL)
    printed = [int(line) for line in proc.stdout.read().split()]
    proc.wait()
    last_printed = printed[-1] if printed else 1
    run = traincard_otel.load(store)
    assert run.stats["corrupt_segments"] == 0  # every file left behind parses
    steps = run.metrics["loss"].steps
    assert steps == list(range(1, len(steps) + 1))  # a gap-free prefix
    rate = last_printed / max(run.metrics["loss"].times[-1] - run.metrics["loss"].times[0], 1e-3)
    lost = last_printed - steps[-1]
    assert lost <= rate * (FLUSH + 1.0), (lost, rate)


# The loop above with compaction every 2 segments and merges of every 2 parts (the thresholds of a
# long run, reached in seconds); "merging" and "deleting" hold the merge where the kill must land
# (reading its parts, or between writing the merged part and deleting the ones it holds).
COMPACTING_LOOP = (
    textwrap.dedent(
        """
    import sys, time, traincard_otel
    from traincard_otel._write import pipeline as _pipeline
    from traincard_otel._write.store import merge
    r = traincard_otel.configure()
    w = _pipeline.active().writer
    w.compact_segments, w.merger.tiers = 2, merge.Tiers(fan_in=2)
    where, read, delete = sys.argv[1], w.backend.read_many, w.backend.delete

    def held(marker):
        sys.stderr.write(marker + "\\n")
        sys.stderr.flush()
        time.sleep(5)

    def read_many(names):
        names = list(names)
        if where == "merging" and any(n.endswith(".parquet") for n in names):
            held("merging")
        return read(names)

    def delete_parts(names):
        if where == "deleting" and any(n.endswith(".parquet") for n in names):
            held("deleting")
        delete(names)

    w.backend.read_many, w.backend.delete = read_many, delete_parts
    lines = True
    """
    )
    + REPORTING
)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["random-0", "random-1", "random-2", "merging", "deleting"])
def test_kill_9_during_compaction_and_merges_loses_at_most_the_last_flush_interval(
    tmp_path: Path, where: str
) -> None:
    store = tmp_path / "store"
    script = tmp_path / "loop.py"
    script.write_text(COMPACTING_LOOP)
    proc = subprocess.Popen(
        [sys.executable, str(script), where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(
            TRAINCARD_DIR=str(store), TRAINCARD_SYSTEM="false", TRAINCARD_FLUSH_INTERVAL=str(FLUSH)
        ),
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == "1"
    if where.startswith("random"):
        time.sleep(random.Random(where).uniform(1.5, 3.0))  # several compactions and merges in
    else:
        assert proc.stderr.readline().strip() == where  # the merge is held there
        time.sleep(2 * FLUSH)  # segments go on being written meanwhile
    proc.send_signal(signal.SIGKILL)
    printed = [int(line) for line in proc.stdout.read().split()]
    proc.wait()
    parts = list(store.rglob("part-*.parquet"))
    assert parts  # the kill came after compaction had started
    run = traincard_otel.load(store)
    assert run.stats["corrupt_segments"] == 0
    steps = run.metrics["loss"].steps
    assert steps == list(range(1, len(steps) + 1))  # a gap-free prefix, nothing twice
    assert run.step_times[0].steps == list(range(1, len(run.step_times[0].steps) + 1))
    lines = [r["message"] for r in run.logs if r["message"].startswith("line ")]
    assert lines == [f"line {10 * k}" for k in range(1, len(lines) + 1)]
    times = run.metrics["loss"].times
    rate = printed[-1] / max(times[-1] - times[0], 1e-3)
    lost = printed[-1] - steps[-1]
    assert lost <= rate * (FLUSH + 1.0), (lost, rate)


class _DeadBackend(LocalBackend):
    """A datastore that blocks for a long time, then fails, on every write."""

    def __init__(self, root: Path, block: float) -> None:
        super().__init__(root)
        self.block, self.calls = block, 0

    def write(self, name: str, data: bytes) -> None:
        self.calls += 1
        time.sleep(self.block)
        raise ConnectionError("datastore unreachable")


def test_dead_storage_never_blocks_reporting_and_drops_are_counted(tmp_path: Path) -> None:
    backend = _DeadBackend(tmp_path, block=0.5)
    state: dict[str, object] = {}
    writer = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=0.05, max_pending=500)
    writer.set_state(state)
    writer.start()
    t0 = time.perf_counter()
    for i in range(200):  # 2000 rows in runs of 10, as the converter hands them over
        writer.add(
            segment.metric_run("train", ["loss"], list(range(10 * i, 10 * i + 10)), [0.0] * 10, [1.0] * 10)
        )
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5  # adds never wait for the (blocked) storage thread
    time.sleep(0.8)  # one blocked write attempt comes back with its error
    assert writer.dropped["buffer_full"] >= 1500  # memory stayed bounded at max_pending rows
    assert writer.write_errors >= 1 and backend.calls >= 1
    t0 = time.perf_counter()
    assert writer.close(timeout_s=1.0) is False
    assert time.perf_counter() - t0 < 1.5  # exit is bounded although storage blocks


def test_failed_writes_are_retried_under_the_same_name(tmp_path: Path) -> None:
    class Flaky(LocalBackend):
        fail = True

        def write(self, name: str, data: bytes) -> None:
            if self.fail and "seg-" in name:
                raise ConnectionError("blip")
            super().write(name, data)

    backend = Flaky(tmp_path)
    writer = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=60)
    writer.add({"k": "m", "t": 0.0, "s": 1, "v": {"loss": 1.0}})
    assert writer.flush_now() is False
    backend.fail = False
    writer.add({"k": "m", "t": 0.0, "s": 2, "v": {"loss": 0.5}})
    assert writer.flush_now() is True
    assert sorted(p.name for p in tmp_path.rglob("seg-*")) == ["seg-00000001.jsonl", "seg-00000002.jsonl"]
    assert traincard_otel.load(tmp_path).metrics["loss"].steps == [1, 2]


@pytest.mark.slow
def test_exit_is_bounded_when_the_s3_store_dies_mid_run(tmp_path: Path) -> None:
    from tests.support.s3_server import metaflow_s3_env

    script = tmp_path / "s3loop.py"
    script.write_text(
        textwrap.dedent(
            """
        import sys, time, traincard_otel
        from traincard_otel._store.backends import MetaflowBackend
        r = traincard_otel.Reporter(backend=MetaflowBackend("s3", sys.argv[1], "Flow/1/train/1/traincard"))
        for step in range(1, 100000):
            r.metrics({"loss": 1.0 / step}, step=step)
            time.sleep(0.002)
            if step == 300:
                print("ready", flush=True)
                sys.stdin.readline()  # the test stops the S3 server now
                t0 = time.monotonic()
                break
        print("training done", flush=True)
        """
        )
    )
    with s3_server() as endpoint:
        env = subprocess_env(
            **metaflow_s3_env(endpoint), TRAINCARD_SYSTEM="false", TRAINCARD_FLUSH_INTERVAL="0.5"
        )
        proc = subprocess.Popen(
            [sys.executable, str(script), "s3://traincard-test/metaflow"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
    # The server is gone: training ends now, and the process must exit within seconds.
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "training done"
    t0 = time.monotonic()
    _out, err = proc.communicate(timeout=60)  # drain stderr: the S3 client complains at length
    assert time.monotonic() - t0 < 8, err[-3000:]
    assert proc.returncode == 0
    assert "could not be written before exit" in err  # what was not flushed is counted and said


def _started(tmp_path: Path, code: str, **env: str) -> subprocess.Popen[str]:
    """``code`` running as a script whose store is ``tmp_path/store``, once it has printed "ready".

    Its threads' stacks go to ``tmp_path/stacks.txt`` on a fatal signal (SIGABRT included): a
    file of its own, as console capture makes descriptor 2 a pipe that a stuck process may never
    empty. SIGINT raises ``KeyboardInterrupt`` in it, as in a terminal: a suite started in the
    background of a shell (``make test &``) hands its children SIGINT ignored, and Python then
    installs no handler of its own."""
    script = tmp_path / "loop.py"
    stacks = tmp_path / "stacks.txt"
    header = (
        "import faulthandler, signal\n"
        f"faulthandler.enable(open({str(stacks)!r}, 'w'), all_threads=True)\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    )
    script.write_text(header + textwrap.dedent(code))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_SYSTEM="false", **env),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("user_handler", [False, True])
def test_sigterm_flushes_marks_terminated_and_keeps_the_signal_status(
    tmp_path: Path, user_handler: bool
) -> None:
    store = tmp_path / "store"
    code = f"""
        import os, signal, sys, time
        if {user_handler}:
            def mine(signum, frame):
                print("user handler ran", flush=True)
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            signal.signal(signal.SIGTERM, mine)
        import traincard_otel
        r = traincard_otel.configure()
        for step in range(1, 100000):
            r.metrics({{"loss": 1.0 / step}}, step=step)
            if step == 200:
                print("ready", flush=True)
            time.sleep(0.001)
        """
    proc = _started(tmp_path, code, TRAINCARD_FLUSH_INTERVAL="30")  # nothing flushed before SIGTERM
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5
    assert proc.returncode == -signal.SIGTERM
    assert ("user handler ran" in out) is user_handler  # chained, not replaced
    run = traincard_otel.load(store)
    assert run.status["status"] == "terminated" and run.status["terminated_by"] == "SIGTERM"
    assert run.metrics["loss"].steps[-1] >= 200  # the buffered rows were flushed by the handler


def test_ctrl_c_ends_the_run_terminated_by_sigint_not_finished(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code = """
        import time
        import traincard_otel
        r = traincard_otel.Reporter()
        with r.phase("train"):
            for step in range(1, 100000):
                r.metric("loss", 1.0 / step, step)
                r.step_end(step)
                if step == 50:
                    print("ready", flush=True)
                time.sleep(0.002)
        """
    proc = _started(tmp_path, code)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C in the terminal sends
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # where every thread is (faulthandler writes them on SIGABRT)
        proc.send_signal(signal.SIGABRT)
        _out, err = proc.communicate(timeout=30)
        stacks = (tmp_path / "stacks.txt").read_text(errors="replace")
        pytest.fail(f"the interrupted loop did not end within 30 s:\n{stacks[-8000:]}\n{err[-2000:]}")
    assert proc.returncode == -signal.SIGINT and err.rstrip().endswith("KeyboardInterrupt")  # as without us
    run = traincard_otel.load(store)
    assert run.status["status"] == "terminated" and run.status["terminated_by"] == "SIGINT"
    assert run.status.get("failure") is None  # an interruption, not a failure
    assert run.metrics["loss"].steps[-1] >= 50
    banners = {b["kind"]: b["text"] for b in build_payload(run, final=True)["banners"]}
    assert banners["terminated"].startswith("Terminated by SIGINT at step")
