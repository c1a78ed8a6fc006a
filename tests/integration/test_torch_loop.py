"""A hand-written PyTorch loop with three added lines."""

from __future__ import annotations

from pathlib import Path

import pytest

import traincard_otel

torch = pytest.importorskip("torch")


def test_raw_loop_three_lines(store_dir: Path, tmp_path: Path) -> None:
    from traincard_otel.adapters.torch_loop import track

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    tracker = track(opt, model=model, grad_norm_every=5)  # line 1
    assert traincard_otel.instrument(torch.optim.SGD(model.parameters(), lr=0.1)) is not None
    logged = []
    for _ in range(20):
        x, y = torch.randn(16, 8), torch.randn(16, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch=(x, y))  # line 2
        logged.append(float(loss.detach()))
    path = str(tmp_path / "ckpt.pt")
    tracker.save(model.state_dict(), path, metric="loss", value=logged[-1])  # line 3
    tracker.close()
    traincard_otel.shutdown()

    run = traincard_otel.load(store_dir)
    assert run.metrics["loss"].steps == list(range(1, 21))
    assert run.metrics["loss"].values == pytest.approx(logged)
    assert run.metrics["grad_norm"].steps == [5, 10, 15, 20]
    assert all(v > 0 for v in run.metrics["grad_norm"].values)
    assert run.step_times[0].steps == list(range(1, 21))
    assert run.throughput["samples_per_second{rank=0}"].values[-1] > 0
    assert run.checkpoints[0]["size_bytes"] == Path(path).stat().st_size and run.checkpoints[0]["step"] == 20
    assert any(p["n"] == "training.save" for p in run.phases)


def test_instrumenting_again_after_close_attaches_again(store_dir: Path) -> None:
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(n: int) -> None:
        for _ in range(n):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    first = traincard_otel.instrument(opt)
    assert traincard_otel.instrument(opt) is first  # attached once
    train(3)
    first.close()
    train(2)  # detached: not reported
    second = traincard_otel.instrument(opt)
    assert second is not first and not second.closed
    train(4)
    second.close()
    traincard_otel.shutdown()
    assert len(traincard_otel.load(store_dir).step_times[0].steps) == 3 + 4


def test_a_model_hint_that_is_no_model_costs_nothing_and_a_bad_peak_fails_at_start(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traincard_otel.exceptions import ConfigError

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = traincard_otel.instrument(opt, model="not a model")  # no FLOPs fields, no error
    handle.close()
    traincard_otel.shutdown()
    assert "flops_per_token" not in traincard_otel.load(store_dir).status["progress"]
    monkeypatch.setenv("TRAINCARD_PEAK_FLOPS", "fast")
    with pytest.raises(ConfigError, match="TRAINCARD_PEAK_FLOPS='fast': give FLOP/s"):
        traincard_otel.instrument(torch.optim.SGD(model.parameters(), lr=0.1), model=model)


def _card_insights(store: Path, model: object = None, *, tokens: bool = True) -> dict[str, object]:
    """A raw loop instrumented with or without ``model=``: its card's insights, through load()."""
    from traincard_otel._read.payload import build_payload

    net = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Flatten(), torch.nn.Linear(8 * 6, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    tracker = traincard_otel.instrument(opt, model=net if model else None, store=str(store))
    for _ in range(5):
        ids = torch.randint(0, 16, (4, 6))
        loss = net(ids).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(loss=loss.detach(), batch={"input_ids": ids} if tokens else ids.float())
    tracker.close()
    traincard_otel.shutdown()
    return dict(build_payload(traincard_otel.load(store))["insights"])


def test_a_loop_without_its_model_is_told_on_the_card_how_to_get_mfu(tmp_path: Path) -> None:
    without = _card_insights(tmp_path / "without")
    assert without["efficiency"] is None
    hint = str(without["mfu_hint"])
    assert "instrument(optimizer, model=model)" in hint and "reporter.progress(flops_per_token=" in hint
    assert "tokens of each step" not in hint  # they were counted
    no_tokens = str(_card_insights(tmp_path / "no-tokens", tokens=False)["mfu_hint"])
    assert no_tokens.startswith(hint) and "tokens of each step" in no_tokens
    given = _card_insights(tmp_path / "given", model=True)
    assert given["mfu_hint"] is None and given["efficiency"] is not None


def test_an_evaluation_loop_gets_no_mfu_hint(tmp_path: Path) -> None:
    from traincard_otel._read.payload import build_payload

    reporter = traincard_otel.configure(store=str(tmp_path / "eval"))
    with reporter.phase("eval"), reporter.meter() as meter:
        for _ in range(60):
            meter.item(0.01, tokens=32)
    traincard_otel.shutdown()
    insights = build_payload(traincard_otel.load(tmp_path / "eval"))["insights"]
    assert insights["efficiency"] is None and insights["mfu_hint"] is None
