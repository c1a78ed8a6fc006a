"""Accelerate: accelerator.log(...) reaches the store, through log_with=, instrument(accelerator) or
autolog(), once whichever of them are combined."""

from __future__ import annotations

from pathlib import Path

import pytest

import traincard_otel

accelerate = pytest.importorskip("accelerate")
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def fresh_accelerator_state() -> None:
    """Each test's Accelerator gets its own settings: Accelerate keeps one state per process, which
    an earlier test's Trainer (bf16, say) would otherwise have set."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def _train(accelerator, steps: int = 12) -> list[float]:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt = accelerator.prepare(model, opt)
    logged = []
    for step in range(1, steps + 1):
        x = torch.randn(8, 4)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        accelerator.log({"loss": loss.item(), "lr": 0.05}, step=step)
        logged.append(loss.item())
    accelerator.log({"eval_loss": 0.5}, step=steps)
    accelerator.end_training()
    return logged


@pytest.mark.parametrize(
    "how", ["log_with", "instrument", "autolog", "log_with+instrument", "log_with+autolog"]
)
def test_accelerate_log_reaches_the_store_once(how: str, store_dir: Path) -> None:
    from traincard_otel.integrations import AccelerateTracker

    passed = AccelerateTracker()
    if "autolog" in how:
        traincard_otel.autolog()
    try:
        accelerator = accelerate.Accelerator(cpu=True, log_with=[passed] if "log_with" in how else None)
    finally:
        traincard_otel.autolog(disable=True)
    if "instrument" in how:
        traincard_otel.instrument(accelerator)
    if "log_with" in how:
        accelerator.init_trackers("demo", config={"lr": 0.05})
    ours = [t for t in accelerator.trackers if isinstance(t, AccelerateTracker)]
    assert len(ours) == 1 and ours[0].accelerator is accelerator
    assert (ours[0] is passed) == ("log_with" in how)  # a tracker passed is the one that reports
    logged = _train(accelerator)
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == list(range(1, 13))
    assert run.metrics["loss"].values == pytest.approx(logged)
    assert run.metrics["eval_loss"].values == [0.5]
    assert run.status["step"] == 12 and run.status["progress"]["world_size"] == 1
    assert run.status["progress"]["flops_per_token"] == 6 * 5  # the model prepare() saw, after attaching
    hyperparameters = [e["body"] for e in run.events if e["name"] == "traincard.hyperparams"]
    assert hyperparameters == ([{"lr": "0.05"}] if "log_with" in how else [])


@pytest.mark.parametrize("hint", [True, False])
def test_the_model_gives_flops_per_token_in_the_accelerators_precision(hint: bool, store_dir: Path) -> None:
    accelerator = accelerate.Accelerator(cpu=True)
    model = accelerator.prepare(torch.nn.Linear(4, 2))  # 10 parameters
    if hint:
        traincard_otel.instrument(accelerator, model=model)
    else:
        traincard_otel.instrument(accelerator)  # the model prepare() has seen
    accelerator.log({"loss": 1.0}, step=1)
    traincard_otel.shutdown()
    progress = traincard_otel.load(store_dir).status["progress"]
    assert progress["flops_per_token"] == 6 * 10 and progress["compute_dtype"] == "fp32"
    assert progress["peak_flops"] is None and "no GPU" in progress["peak_source"]
