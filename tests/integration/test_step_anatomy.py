"""The anatomy of a step, per framework: a part planted slow is the part the card names largest.

Each test trains a tiny model for a few steps with one part made slow by a sleep where that part
runs (the data set's ``__getitem__``, a forward hook, a hook on the loss's gradient, an optimizer
step hook), then reads the store back: that part has the largest median share of the steps, and
every part the adapter can measure was measured.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import traincard_otel
from traincard_otel._analysis.anatomy import RankAnatomy, step_anatomy

from tests.support.loops import mlp, train

torch = pytest.importorskip("torch")

SLOW_S = 0.1  # far above what the tiny models' parts take, even on a busy machine


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    """One compute thread: a thread pool spinning against other work on a busy machine makes a tiny
    model's parts take as long as the planted sleep."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _largest(store: Path) -> tuple[str, RankAnatomy]:
    run = traincard_otel.load(store)
    found = step_anatomy(run)
    assert found is not None and len(found.ranks) == 1
    rank = found.ranks[0]
    return max(rank.shares, key=lambda p: rank.shares[p]), rank


def test_a_raw_loop_with_a_slow_forward_names_forward(store_dir: Path) -> None:
    model = mlp()
    model[0].register_forward_hook(lambda module, args, output: time.sleep(SLOW_S))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train(traincard_otel.instrument(opt, model=model), model, opt, 12)
    with torch.no_grad():  # an evaluation's forward is no step's
        model(torch.randn(8, 16))
    traincard_otel.shutdown()
    part, rank = _largest(store_dir)
    assert part == "forward" and rank.seconds["forward"] >= SLOW_S
    assert rank.unmeasured == () and rank.steps == 12
    assert set(rank.seconds) == {"data", "forward", "backward", "optimizer", "communication", "other"}
    rows = traincard_otel.load(store_dir).to_rows("anatomy")
    assert {r["part"] for r in rows} == set(rank.seconds) and {r["step"] for r in rows} == set(range(1, 13))
    assert all(r["rank"] == 0 and r["seconds"] >= 0 for r in rows)


def test_without_a_process_group_nothing_waits_in_communication(store_dir: Path, tmp_path: Path) -> None:
    """One process has no gradient collectives to wait for: communication is 0 on every step, and
    the graph's end ends the backward. With a process group (gloo, one rank, DDP) the wait after
    the graph is timed again, by a second callback that runs after DDP's own."""
    import torch.distributed as dist

    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train(traincard_otel.instrument(opt, model=model), model, opt, 6)
    traincard_otel.shutdown()
    rows = traincard_otel.load(store_dir).to_rows("anatomy")
    alone = [r["seconds"] for r in rows if r["part"] == "communication"]
    assert len(alone) == 6 and set(alone) == {0.0}
    assert all(r["seconds"] > 0 for r in rows if r["part"] == "backward")

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/group", rank=0, world_size=1)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(mlp())
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        train(traincard_otel.instrument(opt, model=ddp, store=str(tmp_path / "ddp")), ddp, opt, 6)
        traincard_otel.shutdown()
    finally:
        dist.destroy_process_group()
    rows = traincard_otel.load(tmp_path / "ddp").to_rows("anatomy")
    waits = [r["seconds"] for r in rows if r["part"] == "communication"]
    assert len(waits) == 6 and all(w > 0 for w in waits)


def test_a_raw_loop_without_the_model_measures_only_the_optimizer(store_dir: Path) -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.register_step_post_hook(lambda o, args, kwargs: time.sleep(SLOW_S))
    train(traincard_otel.instrument(opt), model, opt, 8)
    traincard_otel.shutdown()
    part, rank = _largest(store_dir)
    assert part == "optimizer" and rank.seconds["optimizer"] >= SLOW_S
    assert rank.unmeasured == ("data", "forward", "backward", "communication")


def test_the_anatomy_setting_off_records_none(store_dir: Path) -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train(traincard_otel.instrument(opt, model=model, anatomy=False), model, opt, 4)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.step_times[0].steps == [1, 2, 3, 4] and run.anatomy == {}


@pytest.mark.slow
def test_an_hf_trainer_whose_data_set_is_slow_names_data(store_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import Trainer

    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    class SlowData(ProgressionDataset):
        def __getitem__(self, i: int) -> dict[str, Any]:
            time.sleep(SLOW_S / 4)  # a batch of 4 sequences waits SLOW_S
            return super().__getitem__(i)

    args = training_args(
        str(tmp_path / "out"),
        max_steps=8,
        per_device_train_batch_size=4,
        eval_strategy="no",
        save_strategy="no",
    )
    trainer = Trainer(
        model=tiny_gpt2(n_layer=1, n_embd=32), args=args, train_dataset=SlowData(64, seq_len=16)
    )
    traincard_otel.instrument(trainer)
    trainer.train()
    traincard_otel.shutdown()
    part, rank = _largest(store_dir)
    assert part == "data" and rank.seconds["data"] >= SLOW_S * 0.9, rank
    assert rank.unmeasured == ()
    assert rank.seconds["forward"] > 0 and rank.seconds["backward"] > 0 and rank.seconds["optimizer"] > 0


def _hf_trainer(tmp_path: Path, trainer_class: Any, steps: int) -> Any:
    from examples.tiny_gpt2 import ProgressionDataset, tiny_gpt2, training_args

    args = training_args(
        str(tmp_path / "out"),
        max_steps=steps,
        per_device_train_batch_size=4,
        eval_strategy="no",
        save_strategy="no",
    )
    return trainer_class(
        model=tiny_gpt2(n_layer=1, n_embd=32), args=args, train_dataset=ProgressionDataset(64, seq_len=16)
    )


@pytest.mark.slow
def test_an_hf_backward_is_timed_around_the_accelerators_call(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a process group the Trainer's ``accelerator.backward`` call is the backward: after
    the first step no hook goes into autograd. A Trainer whose ``training_step`` calls
    ``loss.backward()`` itself keeps the hook on the loss, so its backward is still measured. Either
    way the model's ``forward`` keeps its signature (the Trainer reads it to keep dataset columns)
    and is the class's own again once training is over."""
    pytest.importorskip("transformers")
    import inspect

    from transformers import Trainer

    from traincard_otel.adapters import _anatomy

    armed: list[object] = []
    arm = _anatomy.BackwardMarks.arm
    monkeypatch.setattr(
        _anatomy.BackwardMarks, "arm", lambda marks, tensor: (armed.append(tensor), arm(marks, tensor))
    )

    class OwnBackward(Trainer):  # type: ignore[misc]
        def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
            assert "input_ids" in inspect.signature(model.forward).parameters
            model.train()
            loss = self.compute_loss(model, self._prepare_inputs(inputs))
            loss.backward()
            return loss.detach()

    for trainer_class, steps, arms in ((Trainer, 6, 1), (OwnBackward, 6, 6)):
        armed.clear()
        trainer = _hf_trainer(tmp_path, trainer_class, steps)
        if trainer_class is OwnBackward:  # the embeddings' gradient, inside backward, made slow
            trainer.model.transformer.wte.weight.register_hook(lambda grad: time.sleep(SLOW_S))
        store = tmp_path / trainer_class.__name__
        traincard_otel.instrument(trainer, store=str(store))
        trainer.train()
        traincard_otel.shutdown()
        assert len(armed) == arms, trainer_class
        assert "forward" not in vars(trainer.model) and "backward" not in vars(trainer.accelerator)
        rows = traincard_otel.load(store).to_rows("anatomy")
        backward = [r["seconds"] for r in rows if r["part"] == "backward"]
        assert len(backward) == steps and all(b > 0 for b in backward)
        if trainer_class is OwnBackward:
            assert min(backward) >= SLOW_S


def test_the_outputs_own_gradient_hooks_still_run(store_dir: Path) -> None:
    """The backward's mark is a hook on the forward's output: hooks the user puts on that output
    after the forward, or the model put on it inside, run as before, once each backward."""
    model = mlp()

    class Hooked(torch.nn.Module):  # a model that hooks its own output
        def __init__(self) -> None:
            super().__init__()
            self.net = model
            self.inside: list[int] = []

        def forward(self, x: Any) -> Any:
            out = self.net(x)
            out.register_hook(lambda grad: self.inside.append(1))
            return out

    for root in (model, Hooked()):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        tracker = traincard_otel.instrument(opt, model=root)
        after: list[int] = []
        for _ in range(3):
            out = root(torch.randn(8, 16))
            out.register_hook(lambda grad, seen=after: seen.append(1))
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tracker.log(loss=loss.detach())
        tracker.close()
        assert len(after) == 3 and getattr(root, "inside", [1, 1, 1]) == [1, 1, 1]
    traincard_otel.shutdown()
    rows = traincard_otel.load(store_dir).to_rows("anatomy")
    assert len([r for r in rows if r["part"] == "backward" and r["seconds"] > 0]) == 6


def test_a_forward_wrapped_over_after_instrument_is_left_working(store_dir: Path) -> None:
    """Another library wraps ``forward`` on the instance after the anatomy did (as Accelerate's
    mixed precision does): closing takes nothing of theirs away, and our wrapper stops timing."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(opt, model=model)
    ours = model.forward
    calls: list[int] = []

    def theirs(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return ours(*args, **kwargs)

    model.forward = theirs
    train(tracker, model, opt, 3)
    clock = tracker.anatomy.clock
    tracker.close()
    model(torch.randn(8, 16)).pow(2).mean().backward()  # trains on after the tracker closed
    assert model.forward is theirs and len(calls) == 4
    assert clock.forward == 0.0 and clock.forward_at == 0.0 and clock.first_forward == 0.0  # not timed
    traincard_otel.shutdown()
    rows = traincard_otel.load(store_dir).to_rows("anatomy")
    assert sorted({r["step"] for r in rows}) == [1, 2, 3]
    assert all(r["seconds"] > 0 for r in rows if r["part"] in ("forward", "backward"))


@pytest.mark.slow
def test_a_lightning_fit_whose_backward_is_slow_names_backward(store_dir: Path, tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")

    class Module(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp()

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            loss = self.net(batch[0]).pow(2).mean()
            loss.register_hook(lambda grad: time.sleep(SLOW_S))  # backward starts slow
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(80, 16)), batch_size=8)
    trainer = pl.Trainer(
        max_steps=10,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    traincard_otel.instrument(trainer)
    trainer.fit(Module(), data)
    traincard_otel.shutdown()
    part, rank = _largest(store_dir)
    assert part == "backward" and rank.seconds["backward"] >= SLOW_S
    assert rank.unmeasured == () and rank.seconds["forward"] > 0 and rank.seconds["optimizer"] > 0


def test_accelerate_with_a_slow_optimizer_names_optimizer(store_dir: Path) -> None:
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = accelerate.Accelerator(cpu=True)
    traincard_otel.instrument(accelerator)  # before prepare(), as a script does
    reporter = traincard_otel.configure()
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.register_step_post_hook(lambda o, args, kwargs: time.sleep(SLOW_S))
    model, opt = accelerator.prepare(model, opt)
    for step in range(1, 11):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        reporter.step_end(step)
    traincard_otel.shutdown()
    part, rank = _largest(store_dir)
    assert part == "optimizer" and rank.seconds["optimizer"] >= SLOW_S
    assert rank.unmeasured == () and rank.seconds["forward"] > 0 and rank.seconds["backward"] > 0


@pytest.mark.slow
def test_torchrun_ddp_names_the_slow_rank_and_its_slow_forward(tmp_path: Path) -> None:
    """Plain ``torchrun --nproc_per_node=2`` on gloo: both ranks' steps take as long (DDP waits), so
    the anatomy finds rank 1 by its forward and rank 0 by its wait in communication."""
    import shutil
    import subprocess
    import sys

    from tests.support.helpers import REPO, card_payload, subprocess_env

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed next to this interpreter")
    script = REPO / "tests" / "integration" / "scripts" / "raw_loop.py"
    proc = subprocess.run(
        [torchrun, "--nproc_per_node=2", "--max-restarts=0", str(script)],
        env=subprocess_env(
            TRAINCARD_DIR=str(tmp_path),
            TRAINCARD_SYSTEM="false",
            LOOP_STEPS="15",
            SLOW_RANK="1",
            SLOW_S="0.08",
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [store] = list(tmp_path.iterdir())
    run = traincard_otel.load(store)
    found = step_anatomy(run)
    assert found is not None and [r.rank for r in found.ranks] == [0, 1]
    slow, fast = found.rank(1), found.rank(0)
    assert slow is not None and fast is not None
    assert max(slow.shares, key=lambda p: slow.shares[p]) == "forward" and slow.seconds["forward"] >= 0.08
    assert fast.seconds["communication"] > 0.05 > slow.seconds["communication"]  # rank 0 waits for rank 1
    assert found.straggler is not None and found.straggler.rank == 1 and found.straggler.part == "forward"
    from traincard_otel._read.card.render import render_data

    html = render_data(run, live=False, final=True)
    headline = [b["text"] for b in card_payload(html)["gang"]["headline"]]
    assert any(
        t.startswith("Rank 1 is the straggler: forward")
        and t.endswith("the other ranks wait in communication")
        for t in headline
    ), headline


def test_a_raw_loops_backward_is_timed_around_torch_autograd_backward(store_dir: Path) -> None:
    """Without a process group, a raw loop's ``loss.backward()`` is the backward: timed around
    ``torch.autograd.backward``, which it calls, so after the first step no hook goes on the
    forward's output; closing puts ``torch.autograd.backward`` back."""
    original = torch.autograd.backward
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(opt, model=model)
    armed = []
    for _ in range(4):
        out = model(torch.randn(8, 16))
        armed.append(out._backward_hooks is not None)
        loss = out.pow(2).mean()
        loss.register_hook(lambda grad: time.sleep(SLOW_S))  # backward starts slow
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach())
    assert torch.autograd.backward is not original
    tracker.close()
    assert torch.autograd.backward is original
    assert armed == [True, False, False, False]
    traincard_otel.shutdown()
    part, rank = _largest(store_dir)
    assert part == "backward" and rank.unmeasured == () and rank.steps == 4
    rows = traincard_otel.load(store_dir).to_rows("anatomy")
    assert all(r["seconds"] >= SLOW_S for r in rows if r["part"] == "backward")


def test_a_backward_inside_the_backward_is_part_of_it(store_dir: Path) -> None:
    """Reentrant activation checkpointing runs a backward inside the backward: the backward part
    lasts until the outer call returns, here past a slow gradient hook on the first layer, which
    fires after the checkpointed block's own backward."""
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.block, self.last = torch.nn.Linear(16, 32), mlp(32, 32), torch.nn.Linear(1, 1)

        def forward(self, x: Any) -> Any:
            h = self.first(x)
            return self.last(checkpoint(self.block, h, use_reentrant=True))

    model = Checkpointed()
    model.first.weight.register_hook(lambda grad: time.sleep(SLOW_S))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train(traincard_otel.instrument(opt, model=model), model, opt, 4)
    traincard_otel.shutdown()
    rows = traincard_otel.load(store_dir).to_rows("anatomy")
    backward = [r["seconds"] for r in rows if r["part"] == "backward"]
    other = [r["seconds"] for r in rows if r["part"] == "other"]
    assert len(backward) == 4 and min(backward) >= SLOW_S and max(other) < SLOW_S
