"""Real NVML on a real GPU (runs only where one is present; CI has none)."""

from __future__ import annotations

import pytest

from traincard_otel.telemetry.gpu import GpuSampler


def _nvml_ready() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        return bool(pynvml.nvmlDeviceGetCount())
    except Exception:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _nvml_ready(), reason="no NVIDIA GPU / NVML on this machine")
def test_real_gpu_figures_are_plausible() -> None:
    gpu = GpuSampler()
    gpu.start()
    assert gpu.active, gpu.notes
    samples = gpu.sample()
    by_name: dict[str, list[float]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s.value)
    assert all(0.0 <= v <= 1.0 for v in by_name["hw.gpu.utilization"])
    assert all(
        0 < used <= total
        for used, total in zip(by_name["hw.gpu.memory.usage"], by_name["hw.gpu.memory.limit"], strict=True)
    )
    assert all(10 <= t <= 100 for t in by_name["hw.temperature"])
    if "hw.power" in by_name:
        assert all(5 <= w <= 1500 for w in by_name["hw.power"])
    print({k: v[:2] for k, v in by_name.items()})
