"""Model FLOPs per token against a hand count, the peak table by NVML name, and MFU."""

from __future__ import annotations

import pytest

from traincard_otel._analysis.flops import (
    PEAK_TFLOPS,
    ModelFlops,
    mfu,
    model_flops,
    peak_flops,
    training_fields,
)


def test_tiny_gpt2_flops_per_token_match_a_hand_count() -> None:
    pytest.importorskip("transformers")
    from examples.tiny_gpt2 import tiny_gpt2

    model = tiny_gpt2()  # vocab 64, 2 layers, hidden 64, 64 positions, output layer tied to wte
    d, layers, vocab, positions = 64, 2, 64, 64
    per_layer = (
        2 * d  # ln_1
        + d * 3 * d
        + 3 * d  # attention q, k, v
        + d * d
        + d  # attention output
        + 2 * d  # ln_2
        + d * 4 * d
        + 4 * d  # MLP up
        + 4 * d * d
        + d  # MLP down
    )
    params = vocab * d + positions * d + layers * per_layer + 2 * d  # + ln_f; lm_head is wte
    assert params == 108_288
    m = model_flops(model)
    assert m == ModelFlops(params=108_288, layers=2, hidden=64, frozen=0)
    seq = 32
    assert m.per_token(seq) == 6 * 108_288 + 12 * 2 * 64 * 32 == 698_880
    assert m.per_token() == 6 * 108_288  # no sequence length: the dense term alone


def test_frozen_parameters_cost_the_forward_and_the_activation_backward() -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Linear(20, 5))
    model[0].requires_grad_(False)
    m = model_flops(model)
    assert m is not None and (m.params, m.frozen) == (105, 220)
    assert m.per_token() == 6 * 105 + 4 * 220
    assert m.layers is None and m.attention_per_position == 0


def test_a_config_with_a_parameter_count_and_nothing_without_one() -> None:
    class Config:
        num_hidden_layers = 24
        hidden_size = 1024

    m = model_flops(Config(), params=350_000_000)
    assert m == ModelFlops(350_000_000, 24, 1024)
    assert m.per_token(2048) == 6 * 350e6 + 12 * 24 * 1024 * 2048
    assert model_flops(Config()) is None


@pytest.mark.parametrize(
    ("name", "dtype", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 PCIe", "bf16", 756.5),
        ("NVIDIA H100 NVL", "fp16", 835.5),
        ("NVIDIA H200", "bf16", 989.4),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
        ("NVIDIA A100-PCIE-40GB", "tf32", 156.0),
        ("NVIDIA L4", "bf16", 121.0),
        ("NVIDIA L40S", "fp8", 733.0),
        ("NVIDIA A10", "fp32", 31.2),
        ("Tesla T4", "fp16", 65.0),
        ("Tesla V100-SXM2-16GB", "fp16", 125.0),
        ("Tesla V100-PCIE-32GB", "fp16", 112.0),
        ("NVIDIA GeForce RTX 4090", "bf16", 165.2),
        ("NVIDIA GeForce RTX 3090", "fp16", 71.0),
        ("NVIDIA RTX A6000", "bf16", 154.8),
    ],
)
def test_peaks_by_nvml_name_and_dtype_are_dense_vendor_figures(name: str, dtype: str, tflops: float) -> None:
    peak = peak_flops(name, dtype, environ={})
    assert peak.flops == pytest.approx(tflops * 1e12) and "dense" in peak.source


def test_unknown_peaks_say_why_and_the_override_wins() -> None:
    assert peak_flops(None, "bf16", environ={}) == (
        None,
        "no GPU (set TRAINCARD_PEAK_FLOPS to compare with a known peak)",
    )
    assert peak_flops("NVIDIA A10G", "bf16", environ={}).flops is None  # no vendor datasheet
    assert peak_flops("NVIDIA GeForce RTX 3090 Ti", "bf16", environ={}).flops is None
    assert (
        peak_flops("Tesla T4", "bf16", environ={}).source
        == "T4 has no bf16 figure (set TRAINCARD_PEAK_FLOPS)"
    )
    assert peak_flops(None, "bf16", environ={"TRAINCARD_PEAK_FLOPS": "3.12e14"}) == (
        3.12e14,
        "TRAINCARD_PEAK_FLOPS",
    )
    with pytest.raises(ValueError, match="give FLOP/s per accelerator"):
        peak_flops("Tesla T4", "fp16", environ={"TRAINCARD_PEAK_FLOPS": "fast"})
    assert all(set(v) <= {"fp32", "tf32", "bf16", "fp16", "fp8"} for v in PEAK_TFLOPS.values())


def test_mfu_is_achieved_over_peak_times_accelerators() -> None:
    # 698,880 FLOPs a token at 1e6 tokens/s on two GPUs of 100 TFLOP/s
    assert mfu(698_880, 1e6, 100e12, 2) == pytest.approx(698_880e6 / 200e12)


def test_training_fields_on_a_cpu_have_the_flops_and_an_honest_unknown_peak() -> None:
    pytest.importorskip("transformers")
    from examples.tiny_gpt2 import tiny_gpt2

    fields = training_fields(tiny_gpt2(), "fp32")
    assert fields == {
        "flops_per_token": 6 * 108_288,
        "attention_flops_per_position": 12 * 2 * 64,
        "compute_dtype": "fp32",
        "peak_flops": None,
        "peak_source": "no GPU (set TRAINCARD_PEAK_FLOPS to compare with a known peak)",
    }


def test_the_compute_dtype_comes_from_the_mixed_precision_or_the_weights() -> None:
    torch = pytest.importorskip("torch")
    from traincard_otel._analysis.flops import compute_dtype

    model = torch.nn.Linear(2, 2)
    assert compute_dtype(model) == "fp32"  # on a CPU, no TF32
    assert compute_dtype(model, "bf16") == "bf16" and compute_dtype(model, "no") == "fp32"
    assert compute_dtype(model.to(torch.bfloat16)) == "bf16"
    assert compute_dtype(model.to(torch.float16)) == "fp16"
    assert compute_dtype(object()) == "fp32"  # nothing to read: the honest default
