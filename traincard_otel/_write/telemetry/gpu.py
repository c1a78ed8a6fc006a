"""NVIDIA GPU figures through NVML (``nvidia-ml-py``), under the OTel ``hw.*`` conventions.

Only the GPUs this job uses are read (``CUDA_VISIBLE_DEVICES`` by index or UUID). NVML is
initialised in :meth:`GpuSampler.start`, never at import; each query is wrapped on its own, so an
unsupported query (power on some boards, MIG slices) drops only that figure. If NVML fails mid-run
(a driver reset), GPU sampling stops and one note says why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..._schema import Attr, SystemMetric
from ..._types import Foreign
from ._samples import Sample, sample

_NO_PYNVML = "No GPU figures: NVML is not available (pip install 'traincard-otel[gpu]')"


def visible_devices(spec: str | None, count: int, uuids: list[str]) -> list[int]:
    """NVML indices of the GPUs named by ``CUDA_VISIBLE_DEVICES`` (None: all of them)."""
    if spec is None:
        return list(range(count))
    out: list[int] = []
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        if item.isdigit():
            idx = int(item)
            if idx >= count:
                break  # CUDA stops at the first invalid entry
            out.append(idx)
        else:
            matches = [i for i, u in enumerate(uuids) if u == item or u.startswith(item)]
            if not matches:
                break
            out.append(matches[0])
    return out


class GpuSampler:
    """Per-GPU utilization, memory, temperature, power, energy and ECC errors."""

    def __init__(self, nvml: Foreign = None) -> None:
        self._nvml = nvml
        self.handles: list[tuple[str, object, str]] = []  # (hw.id, NVML's opaque handle, name)
        self.notes: list[str] = []
        self.active = False
        self._opened = False

    def start(self) -> None:
        """Open NVML and pick the job's GPUs (once: later calls do nothing)."""
        if self._opened:
            return
        self._opened = True
        nvml = self._nvml
        if nvml is None:
            try:
                import pynvml
            except ImportError:
                self.notes.append(_NO_PYNVML)
                return
            nvml = self._nvml = pynvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
            all_handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            uuids = [_text(nvml.nvmlDeviceGetUUID(h)) for h in all_handles]
        except Exception as exc:
            self.notes.append(f"No GPU figures: NVML could not start ({type(exc).__name__}: {exc})")
            return
        chosen = visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), count, uuids)
        if not chosen:
            self.notes.append("No GPU figures: no NVIDIA GPU visible to this job")
            return
        for local, idx in enumerate(chosen):
            handle = all_handles[idx]
            try:
                name = _text(nvml.nvmlDeviceGetName(handle))
            except Exception:
                name = "NVIDIA GPU"
            self.handles.append((f"gpu{local}", handle, name))
        self.active = True

    def sample(self) -> list[Sample]:
        if not self.active:
            return []
        try:
            out: list[Sample] = []
            for hw_id, handle, name in self.handles:
                out.extend(self._device(hw_id, handle, name))
            out.extend(torch_allocator())
            return out
        except _Fatal as exc:
            self.active = False
            self.notes.append(f"GPU figures stopped: NVML failed mid-run ({exc}); training continues")
            return []

    def _device(self, hw_id: str, handle: object, name: str) -> list[Sample]:
        nvml = self._nvml
        base = {Attr.HW_ID: hw_id, Attr.HW_NAME: name, Attr.HW_VENDOR: "nvidia"}
        typed = {**base, Attr.HW_TYPE: "gpu"}
        out: list[Sample] = []
        util = self._query(nvml.nvmlDeviceGetUtilizationRates, handle)
        if util is not None:
            out.append(
                sample(SystemMetric.GPU_UTILIZATION, util.gpu / 100.0, {**base, Attr.HW_GPU_TASK: "general"})
            )
        mem = self._query(nvml.nvmlDeviceGetMemoryInfo, handle)
        if mem is not None:
            out.append(sample(SystemMetric.GPU_MEMORY_USAGE, float(mem.used), base))
            out.append(sample(SystemMetric.GPU_MEMORY_LIMIT, float(mem.total), base))
            if mem.total:
                out.append(sample(SystemMetric.GPU_MEMORY_UTILIZATION, mem.used / mem.total, base))
        temp = self._query(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        if temp is not None:
            out.append(sample(SystemMetric.TEMPERATURE, float(temp), typed))
        power = self._query(nvml.nvmlDeviceGetPowerUsage, handle)
        if power is not None:
            out.append(sample(SystemMetric.POWER, power / 1000.0, typed))
        energy = self._query(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        if energy is not None:
            out.append(sample(SystemMetric.ENERGY, energy / 1000.0, typed))
        for kind, error_type in ((0, "corrected"), (1, "uncorrected")):
            count = self._query(nvml.nvmlDeviceGetTotalEccErrors, handle, kind, 0)  # volatile counter
            if count is not None:
                attrs = {Attr.HW_ID: hw_id, Attr.HW_TYPE: "gpu", Attr.ERROR_TYPE: error_type}
                out.append(sample(SystemMetric.ERRORS, float(count), attrs))
        return out

    def _query(self, fn: Callable[..., Foreign], *args: object) -> Foreign:
        nvml = self._nvml
        try:
            return fn(*args)
        except Exception as exc:
            code = getattr(exc, "value", None)
            not_supported = getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3)
            no_permission = getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4)
            if code in (not_supported, no_permission):
                return None
            raise _Fatal(f"{type(exc).__name__}: {exc}") from exc


class _Fatal(Exception):
    pass


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def torch_allocator() -> list[Sample]:
    """This process's torch CUDA allocator figures, for the GPUs it allocated on, only if torch
    already initialised CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_initialized():
            return []
        out = []
        for i in range(cuda.device_count()):
            reserved = cuda.memory_reserved(i)
            if not reserved:  # a GPU this process has not allocated on (another rank's)
                continue
            for kind, value in (
                ("allocated", cuda.memory_allocated(i)),
                ("reserved", reserved),
                ("peak", cuda.max_memory_allocated(i)),
            ):
                attrs = {Attr.HW_ID: f"gpu{i}", Attr.TORCH_MEMORY_KIND: kind}
                out.append(sample(SystemMetric.TORCH_MEMORY, float(value), attrs))
        return out
    except Exception:
        return []
