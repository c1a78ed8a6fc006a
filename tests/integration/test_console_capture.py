"""Console capture in a real process: everything still reaches the terminal unchanged, and the
store holds it as log lines with stream and severity, progress bars collapsed, long lines cut."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import subprocess_env

import traincard_otel

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


def _run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[bytes], traincard_otel.RunData]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        timeout=120,
        env=subprocess_env(TRAINCARD_DIR=str(tmp_path / "store"), TRAINCARD_SYSTEM="false", **env),
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


def test_capture_can_be_switched_off(tmp_path: Path) -> None:
    out, run = _run(tmp_path, TRAINCARD_CAPTURE_CONSOLE="false")
    assert b"hello from print" in out.stdout
    assert not [line for line in run.logs if line["attributes"].get("log.iostream")]
