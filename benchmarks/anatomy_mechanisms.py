"""What each way of marking a step's parts costs, counted: ``bench_anatomy --mechanisms``.

One process under valgrind's callgrind trains the MLP of ``bench_anatomy`` (``--batch`` rows; the
mechanisms' counts do not grow with the batch) with one mechanism installed at a time, and counts
the training thread's instructions over ``--steps`` steps of each; the change against the plain
steps is the mechanism's cost per step. The mechanisms are the ones the step anatomy chose between
(``traincard_otel/adapters/_anatomy.py``): the root module's forward pre and post hooks against a
wrapper of its ``forward``; a hook on the forward's output registered as
``node.register_prehook``, as ``Tensor.register_hook`` or as ``register_hook``'s own two steps (a
hooks dict on the tensor); the autograd callback queued from it; the optimizer's step hooks; and
the anatomy itself, as the adapters install it.

The child asks for each count through a FIFO that a shell loop of ``callgrind_control`` reads, so
that starting the control command is not counted (a ``subprocess.Popen`` would be, and its count
varies from call to call by more than a hook costs). Without valgrind (``--quick``) the child runs
each mechanism for a few steps and checks that its marks were taken.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIFO = "TRAINCARD_BENCH_FIFO"

# Reads "Z" (zero the counts and count) and "D <name>" (dump them as <name> and stop counting).
CONTROL = r"""
ask() { callgrind_control "$@" "$PID" >/dev/null 2>&1; }
while read -r cmd name; do
  if [ "$cmd" = Z ]; then ask -z; ask -i on; else ask -d "$name"; ask -i off; fi
done < "$FIFO"
"""


def child(batch: int, steps: int) -> dict[str, int]:
    """Each mechanism in turn for ``steps`` steps (counted under callgrind when a FIFO is given);
    returns how many marks each one took, which must be one or more a step."""
    import torch

    from traincard_otel._write.queue import PartClock
    from traincard_otel.adapters._anatomy import Anatomy

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 256)
    engine = torch.autograd.Variable._execution_engine
    fifo = os.open(os.environ[FIFO], os.O_WRONLY) if os.environ.get(FIFO) else None
    marks: list[int] = []
    removers: list[Callable[[], None]] = []

    def mark(*_: object) -> None:
        marks.append(1)

    def hooks() -> None:
        handles = [model.register_forward_pre_hook(mark), model.register_forward_hook(mark)]
        removers.extend(h.remove for h in handles)

    def on_output(after: Callable[[Any], object]) -> None:
        inner = model.forward

        def forward(*args: Any) -> Any:
            out = inner(*args)
            after(out)
            return out

        model.forward = forward  # type: ignore[method-assign]
        removers.append(lambda: delattr(model, "forward"))

    def direct(hook: Callable[[Any], None]) -> Callable[[Any], None]:
        def arm(out: Any) -> None:
            out._backward_hooks = OrderedDict({-1: hook})
            out.grad_fn._register_hook_dict(out)

        return arm

    def queue_mark(*_: object) -> None:
        marks.append(1)
        engine.queue_callback(mark)

    def optimizer_hooks() -> None:
        handles = [opt.register_step_pre_hook(mark), opt.register_step_post_hook(mark)]
        removers.extend(h.remove for h in handles)

    clock = PartClock((True,) * 5)

    def bracketed() -> None:
        inner = torch.autograd.backward

        def backward(*args: Any, **kwargs: Any) -> Any:
            mark()
            out = inner(*args, **kwargs)
            mark()
            return out

        torch.autograd.backward = backward
        removers.append(lambda: setattr(torch.autograd, "backward", inner))

    def anatomy() -> None:  # as a raw loop's adapter installs it (adapters/_anatomy.py install())
        installed = Anatomy(clock)
        installed.watch_forward(model)
        installed.bracket_backward(torch.autograd)
        installed.watch_optimizer(opt)
        removers.append(installed.remove)

    mechanisms: dict[str, Callable[[], None]] = {  # (names: a dump's label has no other characters)
        "plain": lambda: None,
        "forward pre and post hooks": hooks,
        "forward wrapper": lambda: on_output(mark),
        "output node.register_prehook": lambda: on_output(lambda out: out.grad_fn.register_prehook(mark)),
        "output Tensor.register_hook": lambda: on_output(lambda out: out.register_hook(mark)),
        "output hooks dict": lambda: on_output(direct(mark)),
        "output hooks dict and autograd callback": lambda: on_output(direct(queue_mark)),
        "torch.autograd.backward wrapped": bracketed,
        "optimizer step hooks": optimizer_hooks,
        "the anatomy": anatomy,
    }
    taken: dict[str, int] = {}
    for name, install in mechanisms.items():
        install()
        for _ in range(3):  # warm-up
            _step(model, opt, x)
        marks.clear()
        _control(fifo, "Z")
        for _ in range(steps):
            _step(model, opt, x)
            parts = clock.take(time.perf_counter())  # (the anatomy's step end; all zero otherwise)
            if parts[1] > 0 and parts[2] > 0 and parts[3] > 0:  # forward, backward, optimizer timed
                marks.append(1)
        _control(fifo, "D " + name.replace(" ", "-"))
        taken[name] = len(marks)
        for remove in removers:
            remove()
        removers.clear()
    return taken


def _step(model: Any, opt: Any, x: Any) -> None:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def _control(fifo: int | None, line: str) -> None:
    if fifo is not None:
        os.write(fifo, (line + "\n").encode())
        time.sleep(3)  # until valgrind has read the request (it polls for it)


def count(batch: int, steps: int) -> list[dict[str, Any]]:
    """The child under callgrind, its counts per mechanism: instructions per step and the change."""
    with tempfile.TemporaryDirectory() as tmp:
        fifo = f"{tmp}/fifo"
        os.mkfifo(fifo)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
        cmd += [f"--callgrind-out-file={tmp}/cg", sys.executable, "-m", "benchmarks.bench_anatomy"]
        cmd += ["--mechanisms-child", "--batch", str(batch), "--steps", str(steps)]
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINCARD_", "OTEL_"))}
        env = dict(base, PYTHONPATH=str(REPO), **{FIFO: fifo})
        with open(f"{tmp}/log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log)
            control = subprocess.Popen(
                ["bash", "-c", CONTROL], env=dict(os.environ, PID=str(proc.pid), FIFO=fifo)
            )
            proc.wait()
            control.wait(timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(Path(f"{tmp}/log").read_bytes()[-2000:].decode(errors="replace"))
        counts: dict[str, int] = {}
        for path in sorted(Path(tmp).glob("cg.*-01"), key=lambda p: int(p.name.split(".")[1].split("-")[0])):
            text = path.read_text()
            name = text.split("desc: Trigger: dump ", 1)[1].split("\n", 1)[0].replace("-", " ")
            counts[name] = int(text.split("\nsummary: ", 1)[1].split()[0])
    plain = counts["plain"] / steps
    return [
        {"mechanism": name, "instructions / step": n / steps, "added / step": n / steps - plain}
        for name, n in counts.items()
    ]
