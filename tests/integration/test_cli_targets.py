"""The CLI on every kind of target, good and bad: a real Metaflow flow, folders of runs, a live run.

Errors are one line on stderr that says what to type instead, with a non-zero exit code and no
traceback; notebook conversions hold what load() holds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import card_payload, subprocess_env

FLOW = textwrap.dedent(
    """
    from metaflow import FlowSpec, step, traincard
    import traincard_otel

    class CliFlow(FlowSpec):
        @step
        def start(self):
            self.next(self.train)

        @traincard
        @step
        def train(self):
            reporter = traincard_otel.Reporter()
            for s in range(1, 11):
                reporter.metric("loss", 1.0 / s, s)
            print("printed inside the step")  # console capture, inside Metaflow
            self.next(self.end)

        @step
        def end(self):
            pass

    if __name__ == "__main__":
        CliFlow()
    """
)


def _cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traincard_otel", *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traincard: error: "), out.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def flow_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    cwd = tmp_path_factory.mktemp("cliflow")
    (cwd / "cli_flow.py").write_text(FLOW)
    out = subprocess.run(
        [sys.executable, "cli_flow.py", "run"],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    run_id = next(p.name for p in (cwd / ".metaflow" / "CliFlow").iterdir() if p.name.isdigit())
    return cwd, run_id


@pytest.mark.slow
def test_every_depth_of_pathspec_resolves(flow_dir: tuple[Path, str]) -> None:
    cwd, run_id = flow_dir
    for target in (
        "CliFlow",
        "CliFlow/latest",
        f"CliFlow/{run_id}",
        f"CliFlow/{run_id}/train",
        "CliFlow/latest/train",
    ):
        out = _cli(cwd, "render", target, "-o", "card.html")
        assert out.returncode == 0, (target, out.stderr)
        assert card_payload((cwd / "card.html").read_text())["run"]["step"] == 10, target
    listing = _cli(cwd, "ls", "CliFlow/latest")
    assert (
        listing.returncode == 0
        and f"CliFlow/{run_id}/train/" in listing.stdout
        and "finished" in listing.stdout
    )
    tail = _cli(cwd, "tail", f"CliFlow/{run_id}/train")
    assert "loss = 0.1" in tail.stdout and "printed inside the step" in tail.stdout


@pytest.mark.slow
def test_mistyped_pathspecs_say_what_to_type(flow_dir: tuple[Path, str]) -> None:
    cwd, run_id = flow_dir
    _one_line_error(_cli(cwd, "render", "CliFlw"), "no flow 'CliFlw'", "CliFlow")
    _one_line_error(_cli(cwd, "render", "CliFlow/12345"), "no run '12345'", "CliFlow/latest")
    _one_line_error(_cli(cwd, "render", f"CliFlow/{run_id}/trian"), "no step 'trian'", "train")
    _one_line_error(_cli(cwd, "render", f"CliFlow/{run_id}/train/999"), "no task '999'")
    _one_line_error(_cli(cwd, "ls", "./no-such-folder"), "neither a folder nor a Metaflow pathspec")
    (cwd / "a-file.txt").write_text("x")
    _one_line_error(_cli(cwd, "render", "a-file.txt"), "is a file")
    (cwd / "empty").mkdir(exist_ok=True)
    _one_line_error(_cli(cwd, "render", "empty"), "no traincard telemetry", "traincard ls")
    debug = _cli(cwd, "--debug", "render", "CliFlw")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def _store_with_run(folder: Path, name: str, steps: int) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import traincard_otel\nr = traincard_otel.Reporter()\n"
            f"for s in range(1, {steps + 1}): r.metric('loss', 1.0 / s, s)\nr.close()",
        ],
        env=subprocess_env(TRAINCARD_DIR=str(folder), TRAINCARD_RUN_NAME=name, TRAINCARD_SYSTEM="false"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def test_a_folder_of_runs_is_listed_and_renders_its_newest(tmp_path: Path) -> None:
    _store_with_run(tmp_path / "runs", "first", 5)
    time.sleep(0.05)
    _store_with_run(tmp_path / "runs", "second", 7)
    listing = _cli(tmp_path, "ls", "runs")
    assert listing.returncode == 0
    assert "runs/first" in listing.stdout and "runs/second" in listing.stdout
    out = _cli(tmp_path, "render", "runs", "-o", "card.html")
    assert out.returncode == 0
    assert "2 runs under runs; using the newest" in out.stderr and "second" in out.stderr
    assert card_payload((tmp_path / "card.html").read_text())["run"]["step"] == 7
    assert traincard_otel.load(tmp_path / "runs").metrics["loss"].steps[-1] == 7  # load() agrees


def test_watch_rewrites_the_card_while_the_run_is_live(tmp_path: Path) -> None:
    store = tmp_path / "live"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time, traincard_otel\nr = traincard_otel.Reporter()\n"
            "for s in range(1, 41):\n    r.metric('loss', 1.0 / s, s)\n    time.sleep(0.1)\nr.close()",
        ],
        env=subprocess_env(
            TRAINCARD_DIR=str(store), TRAINCARD_FLUSH_INTERVAL="0.2", TRAINCARD_SYSTEM="false"
        ),
    )
    try:
        deadline = time.time() + 30
        while not list(store.rglob("state.json")) and time.time() < deadline:
            time.sleep(0.1)
        out = _cli(
            tmp_path, "render", str(store), "--watch", "--interval", "0.5", "-o", "card.html", timeout=90
        )
    finally:
        writer.wait(timeout=60)
    assert out.returncode == 0, out.stderr
    writes = [line for line in out.stdout.splitlines() if line.startswith("wrote ")]
    assert len(writes) >= 2 and "running" in writes[0] and "finished" in writes[-1]
    assert card_payload((tmp_path / "card.html").read_text())["run"]["step"] == 40


def test_help_shows_examples() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "traincard_otel", "render", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "examples:" in out.stdout and "--watch" in out.stdout


def test_notebook_conversions_hold_what_load_holds(tmp_path: Path) -> None:
    _store_with_run(tmp_path / "runs", "nb", 6)
    run = traincard_otel.load(tmp_path / "runs" / "nb")
    long = run.to_pandas()
    assert (
        list(long["step"]) == run.metrics["loss"].steps and list(long["value"]) == run.metrics["loss"].values
    )
    wide = run.to_pandas(wide=True)
    assert list(wide.index) == [1, 2, 3, 4, 5, 6] and wide.loc[2, "loss"] == 0.5
    table = run.to_arrow("metrics")
    assert table.num_rows == 6 and table.column("metric").to_pylist() == ["loss"] * 6
    assert len(run.to_pandas("step_times")) == 0 and len(run.to_pandas("checkpoints")) == 0
    html = run._repr_html_()
    assert html.startswith("<iframe srcdoc=") and "tc-payload" in html
    out = _cli(tmp_path, "export", "runs/nb", "--format", "parquet", "-o", "m.parquet")
    assert out.returncode == 0, out.stderr
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "m.parquet").num_rows == 6
