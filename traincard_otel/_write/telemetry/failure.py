"""Failure records and the likely-OOM verdict.

A verdict is only given where the evidence supports it, and the evidence is listed with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NotRequired, TypedDict

from ..._schema import SystemMetric
from ..._schema.keys import split_reading_key
from ..._types import JsonObject

_CUDA_OOM = re.compile(
    r"CUDA out of memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|"
    r"cudaErrorMemoryAllocation|out of memory.*(cuda|gpu|device)|HIP out of memory",
    re.IGNORECASE,
)
_NCCL = re.compile(r"NCCL|Watchdog caught collective operation timeout|ProcessGroupGloo.*timed out", re.I)
_NEAR_LIMIT = 0.9


def _vram_near_limit(last_system: Mapping[str, object]) -> list[str]:
    out = []
    for key, value in last_system.items():
        if (
            split_reading_key(key)[0] == SystemMetric.GPU_MEMORY_UTILIZATION.name
            and isinstance(value, (int, float))
            and value >= _NEAR_LIMIT
        ):
            out.append(f"{key} = {value:.0%} in the last sample")
    return out


class VerdictSection(TypedDict):
    """What a failure probably was: ``kind`` (None without a verdict), a headline, the evidence;
    for a CUDA out-of-memory error with the ``memory_history`` setting, ``memory``: the allocator's
    snapshot at that moment summarised (:func:`traincard_otel._analysis.memory.oom_summary`)."""

    kind: str | None
    text: str
    evidence: list[str]
    memory: NotRequired[JsonObject]


def classify(
    exc_type: str, message: str, traceback: str, last_system: Mapping[str, object] | None = None
) -> VerdictSection:
    """Return ``{"kind", "text", "evidence"}``; ``kind`` is None when there is no verdict."""
    last_system = last_system or {}
    evidence: list[str] = []
    text = f"{exc_type}: {message}"
    if exc_type in {"OutOfMemoryError", "torch.cuda.OutOfMemoryError"} or _CUDA_OOM.search(text):
        evidence.append(f"exception {exc_type}: {message[:200]}")
        evidence.extend(_vram_near_limit(last_system))
        return {"kind": "cuda_oom", "text": "Likely CUDA out of memory", "evidence": evidence}
    if exc_type == "MemoryError":
        evidence.append("MemoryError raised by the Python process")
        util = next(
            (
                v
                for k, v in last_system.items()
                if split_reading_key(k)[0] == SystemMetric.MEMORY_UTILIZATION.name
            ),
            None,
        )
        if isinstance(util, (int, float)):
            evidence.append(f"host memory utilization {util:.0%} in the last sample")
        return {"kind": "host_oom", "text": "Likely host (CPU RAM) out of memory", "evidence": evidence}
    if _NCCL.search(text) or ("timed out" in message.lower() and "collective" in traceback.lower()):
        evidence.append(f"exception {exc_type}: {message[:200]}")
        return {
            "kind": "nccl_timeout",
            "text": "Distributed collective failed or timed out",
            "evidence": evidence,
        }
    return {"kind": None, "text": "", "evidence": []}
