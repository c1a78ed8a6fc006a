"""Regenerate the README's screenshots from real runs of the demo flow (``make screenshots``).

Runs ``examples/hf_finetune_flow.py`` twice in a temporary folder (a healthy run with eval and
checkpoints, and one that raises mid-training), renders each train task's card with
``traincard render`` and photographs it in headless Chromium at a laptop's width.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
FLOW = REPO / "examples" / "hf_finetune_flow.py"


def _run_flow(cwd: Path, env: dict[str, str], *args: str) -> str:
    """Run the demo flow; return the pathspec of its train task."""
    subprocess.run([sys.executable, str(FLOW), "run", *args], cwd=cwd, env=env, check=False)
    code = (
        "import metaflow; metaflow.namespace(None); run = metaflow.Flow('FinetuneFlow').latest_run; "
        "print(next(iter(run['train'])).pathspec)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _photograph(html: Path, png: Path, height: int) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--window-size=1280,{height}",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-profile-')}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=opts)
    try:
        driver.get(html.as_uri())
        driver.implicitly_wait(2)
        driver.save_screenshot(str(png))
    finally:
        driver.quit()
    from PIL import Image

    with Image.open(png) as img:  # a palette keeps the file small for the README
        img.convert("RGB").quantize(colors=128).save(png, optimize=True)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="traincard-screenshots-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
    env.setdefault("USER", "traincard")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    traincard = [sys.executable, "-m", "traincard_otel"]
    for name, args, height in (
        ("card", ("--max_steps", "600"), 2200),
        ("card-failed", ("--max_steps", "600", "--fail_at", "250"), 1400),
    ):
        pathspec = _run_flow(work, env, *args)
        html = work / f"{name}.html"
        subprocess.run([*traincard, "render", pathspec, "-o", str(html)], cwd=work, env=env, check=True)
        # The pictures are published: paths of the machine that made them read as the project's.
        html.write_text(html.read_text().replace(str(REPO), "."))
        _photograph(html, OUT / f"{name}.png", height)
        print(f"{name}.png from {pathspec}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
