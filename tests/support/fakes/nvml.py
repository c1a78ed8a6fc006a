"""A small fake of the pynvml calls the GPU sampler makes (no GPU on CI machines)."""

from __future__ import annotations

import types
from typing import Any

NVML_TEMPERATURE_GPU = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_GPU_IS_LOST = 15


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """Two devices with fixed figures; ``fail`` makes every call raise, ``no_power`` drops power."""

    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NO_PERMISSION = NVML_ERROR_NO_PERMISSION
    NVMLError = NVMLError

    def __init__(self, devices: int = 2) -> None:
        self.devices = [
            {
                "uuid": f"GPU-{i}aaa-bbbb",
                "name": "NVIDIA H100 80GB HBM3",
                "util": 50 + 10 * i,
                "used": (10 + i) * 2**30,
                "total": 80 * 2**30,
                "temp": 60 + i,
                "power_mw": 300_000 + 1000 * i,
                "energy_mj": 5_000_000 + i,
            }
            for i in range(devices)
        ]
        self.fail = False
        self.no_power = False
        self.inited = False

    def _check(self) -> None:
        if self.fail:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)

    def nvmlInit(self) -> None:
        self._check()
        self.inited = True

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict[str, Any]:
        self._check()
        return self.devices[i]

    def nvmlDeviceGetUUID(self, h: dict[str, Any]) -> str:
        self._check()
        return h["uuid"]

    def nvmlDeviceGetName(self, h: dict[str, Any]) -> bytes:
        self._check()
        return h["name"].encode()

    def nvmlDeviceGetUtilizationRates(self, h: dict[str, Any]) -> Any:
        self._check()
        return types.SimpleNamespace(gpu=h["util"], memory=20)

    def nvmlDeviceGetMemoryInfo(self, h: dict[str, Any]) -> Any:
        self._check()
        return types.SimpleNamespace(used=h["used"], total=h["total"], free=h["total"] - h["used"])

    def nvmlDeviceGetTemperature(self, h: dict[str, Any], sensor: int) -> int:
        self._check()
        return h["temp"]

    def nvmlDeviceGetPowerUsage(self, h: dict[str, Any]) -> int:
        self._check()
        if self.no_power:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return h["power_mw"]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: dict[str, Any]) -> int:
        self._check()
        return h["energy_mj"]

    def nvmlDeviceGetTotalEccErrors(self, h: dict[str, Any], kind: int, counter: int) -> int:
        self._check()
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
