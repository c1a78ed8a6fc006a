"""The likely-OOM verdict: given only where the evidence supports it, with the evidence listed."""

from __future__ import annotations

from traincard_otel._write.telemetry.failure import classify


def test_cuda_oom_with_vram_near_its_limit() -> None:
    v = classify(
        "OutOfMemoryError",
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "",
        {"hw.gpu.memory.utilization[gpu0]": 0.97, "hw.gpu.memory.utilization[gpu1]": 0.40},
    )
    assert v["kind"] == "cuda_oom"
    assert any("97%" in e and "gpu0" in e for e in v["evidence"]) and not any(
        "gpu1" in e for e in v["evidence"]
    )


def test_cublas_and_cudnn_allocation_failures_are_cuda_oom() -> None:
    assert (
        classify("RuntimeError", "CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)", "")["kind"]
        == "cuda_oom"
    )
    assert classify("RuntimeError", "cuDNN error: CUDNN_STATUS_ALLOC_FAILED", "")["kind"] == "cuda_oom"


def test_host_memory_error() -> None:
    v = classify("MemoryError", "", "", {"system.memory.utilization": 0.99})
    assert v["kind"] == "host_oom" and any("99%" in e for e in v["evidence"])


def test_nccl_timeouts_are_their_own_class() -> None:
    msg = (
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE) ran for 600000 ms"
    )
    assert classify("DistBackendError", msg, "")["kind"] == "nccl_timeout"


def test_no_verdict_without_evidence() -> None:
    assert classify("ValueError", "shapes (3,) and (4,) not aligned", "")["kind"] is None
    assert classify("KeyError", "'out of memory'", "")["kind"] is None
