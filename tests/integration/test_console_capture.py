"""Console capture in a real process: everything still reaches the terminal unchanged, and the
store holds it as log lines with stream and severity, progress bars collapsed, long lines cut."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import traincard_otel

from tests.support.helpers import REPO, metaflow_client, subprocess_env

SCRIPT = textwrap.dedent(
    """
    import logging, os, sys, warnings
    from tqdm import tqdm
    import traincard_otel

    reporter = traincard_otel.Reporter()
    print("hello from print")
    os.write(1, b"from a C extension on fd 1\\n")
    os.write(2, b"from a C extension on fd 2\\n")
    warnings.warn("careful now")
    logging.getLogger("user").warning("a logged warning that also prints")
    for _ in tqdm(range(300), mininterval=0, file=sys.stderr):
        pass
    print("x" * 100_000)
    os.write(1, b"bad bytes \\xff\\xfe end\\n")
    try:
        1 / 0
    except ZeroDivisionError:
        import traceback
        traceback.print_exc()
    print("done", flush=True)
    """
)


# A Python warning while a tqdm bar draws, from the training thread and from a DataLoader worker.
WARNING_IN_BAR = textwrap.dedent(
    """
    import sys, warnings
    import torch
    from torch.utils.data import DataLoader, Dataset
    from tqdm import tqdm
    import traincard_otel

    class Warns(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            if i == 5:
                warnings.warn("odd sample in a worker")
            return torch.zeros(2)

    reporter = traincard_otel.Reporter()
    for i in tqdm(range(40), mininterval=0, file=sys.stderr):
        if i == 20:
            warnings.warn("careful inside the bar")
    for _ in tqdm(DataLoader(Warns(), batch_size=2, num_workers=2), mininterval=0, file=sys.stderr):
        pass
    """
)


# stdout and stderr to one place, as in a terminal or `2>&1`: tqdm's bar on stderr is cleared and
# redrawn around each line it writes to stdout, and a loop prints to both.
ONE_PLACE = textwrap.dedent(
    """
    import os, sys, time
    from tqdm import tqdm
    import traincard_otel

    reporter = traincard_otel.Reporter()
    bar = tqdm(range(120), file=sys.stderr, mininterval=0, bar_format="{n}/{total}")
    for i in bar:
        if i % 3 == 0:
            bar.write(f"{{'loss': {i}}}", file=sys.stdout)
        print(f"out {i}")
        print(f"err {i}", file=sys.stderr)
        os.write(2 if i % 2 else 1, f"fd {i}\\n".encode())
        time.sleep(0.002)
    bar.close()
    print("ERROR: printed to stderr at the end", file=sys.stderr)
    print("done")
    reporter.close()
    """
)


def _run(
    tmp_path: Path, script_text: str = SCRIPT, *, one_place: bool = False, **env: str
) -> tuple[subprocess.CompletedProcess[bytes], traincard_otel.RunData]:
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "script.py"
    script.write_text(script_text)
    out = subprocess.run(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if one_place else subprocess.PIPE,
        timeout=120,
        env=subprocess_env(
            TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_SYSTEM="false", PYTHONUNBUFFERED="1", **env
        ),
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out, traincard_otel.load(tmp_path / "store")


def test_console_output_reaches_the_terminal_unchanged_and_the_card_as_log_lines(tmp_path: Path) -> None:
    out, run = _run(tmp_path)
    stdout, stderr = out.stdout, out.stderr
    assert b"hello from print\n" in stdout and b"from a C extension on fd 1\n" in stdout
    assert b"x" * 100_000 in stdout and b"bad bytes \xff\xfe end\n" in stdout and stdout.endswith(b"done\n")
    assert b"from a C extension on fd 2\n" in stderr and b"UserWarning: careful now" in stderr
    assert b"ZeroDivisionError" in stderr and b"300/300" in stderr

    lines = [(line["level"], line["attributes"].get("log.iostream"), line) for line in run.logs]
    by_text = {line["message"]: (level, stream) for level, stream, line in lines}
    assert by_text["hello from print"] == ("INFO", "stdout")
    assert by_text["from a C extension on fd 1"] == ("INFO", "stdout")
    assert by_text["from a C extension on fd 2"] == ("ERROR", "stderr")
    assert any(level == "WARNING" and "careful now" in text for text, (level, _s) in by_text.items())
    assert by_text["bad bytes \\xff\\xfe end"] == ("INFO", "stdout")  # escaped, never raw bytes
    bars = [text for text in by_text if "it/s]" in text or "300/300" in text]
    assert len(bars) == 1 and "300/300" in bars[0]  # collapsed to its final state
    long = next(text for text in by_text if text.startswith("xxxx"))
    assert long.endswith("[truncated 95904 chars]") and len(long) < 4200
    error = next(line for level, _s, line in lines if line["message"].startswith("ZeroDivisionError"))
    assert error["level"] == "ERROR" and error["traceback"].startswith("Traceback (most recent call last):")
    # the logging record came through the logging bridge; its printed copy is not a second line
    assert sum("a logged warning that also prints" in text for text in by_text) == 1
    assert all(line["attributes"].get("traincard.rank") == "0" for _l, stream, line in lines if stream)


def test_a_warning_printed_while_a_tqdm_bar_draws_reaches_the_logs_as_a_warning(tmp_path: Path) -> None:
    out, run = _run(tmp_path, WARNING_IN_BAR)
    assert b"UserWarning: careful inside the bar" in out.stderr  # the terminal has it
    warnings = [line["message"] for line in run.logs if line["level"] == "WARNING"]
    assert any("UserWarning: careful inside the bar" in text and "20/40" in text for text in warnings)
    assert any("UserWarning: odd sample in a worker" in text for text in warnings)
    bars = [line["message"] for line in run.logs if line["level"] == "INFO"]
    assert any("40/40" in text for text in bars) and any("4/4" in text for text in bars)


def test_stdout_and_stderr_to_one_place_keep_their_order(tmp_path: Path) -> None:
    plain, _ = _run(tmp_path / "plain", ONE_PLACE, one_place=True, TRAINCARD_CAPTURE_CONSOLE="false")
    out, run = _run(tmp_path / "captured", ONE_PLACE, one_place=True)
    assert out.stdout == plain.stdout  # byte for byte what the terminal or log file got without capture
    assert b"\r119/120out 119\nerr 119\nfd 119\n" in out.stdout and b"{'loss': 3}\n\r3/120" in out.stdout
    lines = {line["message"]: line for line in run.logs if line["attributes"].get("traincard.rank")}
    assert "119/120out 119" in lines and "err 119" in lines and "fd 119" in lines and "done" in lines
    assert not [line for line in run.logs if line["attributes"].get("log.iostream")]  # not known
    assert lines["err 7"]["level"] == "INFO"
    assert lines["ERROR: printed to stderr at the end"]["level"] == "ERROR"


# transformers and Lightning log through handlers of their own (to stderr), not the root logger.
LIBRARY_LOGS = textwrap.dedent(
    """
    import logging, warnings
    import lightning.pytorch
    from transformers.utils import logging as hf_logging
    import traincard_otel

    reporter = traincard_otel.Reporter()
    hf_logging.get_logger("transformers.modeling_utils").warning("`loss_type=None` was set in the config")
    logging.getLogger("lightning.pytorch.utilities.rank_zero").info("GPU available: False, used: False")
    # a warning from inside Lightning, which prints it without its category
    warnings.warn_explicit("The 'train_dataloader' does not have many workers", UserWarning,
                           lightning.pytorch.__file__, 433)
    reporter.close()
    """
)


def test_library_log_records_keep_their_level_and_are_not_printed_errors(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    lightning = pytest.importorskip("lightning")
    out, run = _run(tmp_path, LIBRARY_LOGS)
    assert b"`loss_type=None` was set in the config" in out.stderr  # printed as before
    assert b"GPU available: False, used: False" in out.stderr
    got = {(line["level"], line["message"]) for line in run.logs}
    assert ("WARNING", "transformers.modeling_utils: `loss_type=None` was set in the config") in got
    assert ("INFO", "lightning.pytorch.utilities.rank_zero: GPU available: False, used: False") in got
    warning = f"{lightning.pytorch.__file__}:433: The 'train_dataloader' does not have many workers"
    assert warning.encode() in out.stderr and ("WARNING", warning) in got
    assert len(got) == 3  # the printed copies are not recorded again (as errors, from stderr)


def test_capture_can_be_switched_off(tmp_path: Path) -> None:
    out, run = _run(tmp_path, TRAINCARD_CAPTURE_CONSOLE="false")
    assert b"hello from print" in out.stdout
    assert not [line for line in run.logs if line["attributes"].get("log.iostream")]


@pytest.mark.slow
def test_a_metaflow_step_keeps_its_task_logs_and_its_card_gets_the_lines(tmp_path: Path) -> None:
    pytest.importorskip("metaflow")
    shutil.copy(REPO / "tests" / "integration" / "flows" / "console_flow.py", tmp_path / "console_flow.py")
    env = subprocess_env(METAFLOW_DATASTORE_SYSROOT_LOCAL=str(tmp_path), TRAINCARD_SYSTEM="false")
    proc = subprocess.run(
        [sys.executable, "console_flow.py", "--no-pylint", "run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    match = re.search(r"\[(\d+)/train/(\d+) ", proc.stdout + proc.stderr)
    assert match, proc.stderr[-3000:]
    code = (
        "task = metaflow.Task(sys.argv[1])\n"
        "run = traincard_otel.load(task)\n"
        "print(json.dumps({'stdout': task.stdout, 'stderr': task.stderr, 'logs': run.logs}))"
    )
    got = metaflow_client(code, f"ConsoleFlow/{match.group(1)}/train/{match.group(2)}", tmp_path, env)
    # Metaflow's own task logs still hold everything the step wrote
    for text in ("printed by the train step", "written to fd 1 by the train step", "z" * 50_000):
        assert text in got["stdout"]
    assert "written to fd 2 by the train step" in got["stderr"] and "200/200" in got["stderr"]
    assert "a warning from the train step" in got["stderr"]
    assert "UserWarning: careful at step 30 of the bar" in got["stderr"]  # not ignored by Metaflow
    by_text = {line["message"]: line for line in got["logs"] if line["attributes"].get("log.iostream")}
    assert by_text["printed by the train step"]["level"] == "INFO"
    assert by_text["written to fd 1 by the train step"]["attributes"]["log.iostream"] == "stdout"
    fd2 = by_text["written to fd 2 by the train step"]
    assert fd2["level"] == "ERROR" and fd2["attributes"]["log.iostream"] == "stderr"
    assert any(v["level"] == "WARNING" and "a warning from the train step" in k for k, v in by_text.items())
    warned = [k for k, v in by_text.items() if v["level"] == "WARNING" and "careful at step 30" in k]
    assert any("30/40" in k and "UserWarning: careful at step 30 of the bar" in k for k in warned)
    bars = [k for k in by_text if "/200" in k]
    assert len(bars) == 1 and "200/200" in bars[0] and any("40/40" in k for k in by_text)
    assert any(k.startswith("zzzz") and k.endswith(f"[truncated {50_000 - 4096} chars]") for k in by_text)
    assert "train step done" in by_text


RANK_SCRIPT = textwrap.dedent(
    """
    import os
    import traincard_otel

    reporter = traincard_otel.configure()
    print(f"hello from rank {os.environ['RANK']}", flush=True)
    os.write(2, f"fd 2 of rank {os.environ['RANK']}\\n".encode())
    reporter.close()
    """
)


@pytest.mark.slow
def test_every_torchrun_worker_captures_its_own_console_with_its_rank(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)],
        capture_output=True,
        timeout=180,
        env=subprocess_env(TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_SYSTEM="false"),
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    assert b"hello from rank 0" in out.stdout and b"hello from rank 1" in out.stdout
    assert b"fd 2 of rank 1" in out.stderr
    got = {
        (line["message"], line["attributes"].get("traincard.rank"), line["attributes"].get("log.iostream"))
        for line in traincard_otel.load(tmp_path / "store").logs
    }
    for rank in ("0", "1"):
        assert (f"hello from rank {rank}", rank, "stdout") in got
        assert (f"fd 2 of rank {rank}", rank, "stderr") in got
