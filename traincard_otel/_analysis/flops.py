"""Model FLOPs per token, accelerator peak FLOP/s, and model FLOPs utilisation (MFU).

**The formula.** Training a dense transformer costs, per token,

    6 x N  +  12 x L x d x T   FLOPs

with N the trainable parameters, L the layers, d the hidden size and T the sequence length: 2N
for the forward matrix multiplications and 4N for the backward (gradients of the activations and
of the weights), plus the attention scores and their weighted sum (2 x L x d x T forward per
token, times 3 with the backward). This is the "model FLOPs" of Chowdhery et al., *PaLM* (2022),
appendix B, after Kaplan et al., *Scaling Laws for Neural Language Models* (2020): it counts what
the model needs, not what the hardware did (activation recomputation is not counted, so MFU is
comparable across implementations). N counts each parameter once (a weight shared between the
input embedding and the output layer once). Frozen parameters (adapters such as LoRA train a
few) still cost the forward and the activations' backward, 4 FLOPs each per token, so the dense
term is 6 x trainable + 4 x frozen, which is 6 x N when everything trains. The attention term is
added when L and d are known from the model's config and T from the batches (tokens / samples of
the recent steps).

**MFU** = achieved model FLOP/s / (peak FLOP/s of one accelerator x accelerators), with achieved
= FLOPs per token x tokens per second. Peaks are the vendors' dense figures (never the
"with sparsity" ones) for the dtype the matrix multiplications run in (:data:`PEAK_TFLOPS`);
``TRAINCARD_PEAK_FLOPS`` (FLOP/s per accelerator, ``3.12e14``) overrides the table for anything
else. On a CPU, or an accelerator the table does not know, the peak is unknown and MFU is not
computed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Final, NamedTuple

from .._safety import internal_error
from .._types import Foreign
from ..environment_variables import TRAINCARD_PEAK_FLOPS
from ..exceptions import ConfigError

# Dense peak TFLOP/s per GPU from NVIDIA's datasheets and architecture whitepapers, by the dtype
# of the matrix multiplications: "fp32" (no tensor cores), "tf32", "bf16", "fp16" (tensor cores,
# FP32 accumulate), "fp8". Sources:
#   A100: NVIDIA A100 Tensor Core GPU datasheet (SXM and PCIe, 40/80 GB alike).
#   H100 SXM / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet (the table's sparsity figures
#     halved, as its footnote says).
#   H200 SXM / NVL: NVIDIA H200 Tensor Core GPU datasheet (likewise).
#   L4, L40, L40S: their NVIDIA datasheets (likewise).
#   A10: NVIDIA A10 datasheet. (The A10G of AWS G5 instances has no NVIDIA datasheet and is not
#     listed: set TRAINCARD_PEAK_FLOPS.)
#   T4: NVIDIA T4 datasheet (mixed-precision FP16/FP32; Turing has no bf16 tensor cores).
#   V100 SXM2 / PCIe / V100S: NVIDIA V100 datasheet (tensor figure = mixed precision).
#   RTX 4090: NVIDIA Ada GPU architecture whitepaper, appendix (FP16/BF16 tensor with FP32
#     accumulate, dense).
#   RTX 3090: NVIDIA Ampere GA102 GPU architecture whitepaper, appendix (likewise).
#   RTX A6000: NVIDIA RTX A6000 datasheet (tensor 309.7 with sparsity).
PEAK_TFLOPS: Final[dict[str, dict[str, float]]] = {
    "H100 SXM": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    "H100 NVL": {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5},
    "H100 PCIe": {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0},
    "H200 NVL": {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5},
    "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0},
    "L40": {"fp32": 90.5, "tf32": 90.5, "bf16": 181.0, "fp16": 181.0, "fp8": 362.0},
    "L4": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5},
    "A10": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0},
    "T4": {"fp32": 8.1, "fp16": 65.0},
    "V100S": {"fp32": 16.4, "fp16": 130.0},
    "V100 PCIe": {"fp32": 14.0, "fp16": 112.0},
    "V100": {"fp32": 15.7, "fp16": 125.0},
    "RTX 4090": {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3},
    "RTX 3090": {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0},
    "RTX A6000": {"fp32": 38.7, "tf32": 77.4, "bf16": 154.8, "fp16": 154.8},
}


def _table_key(device: str) -> str | None:
    """The table's entry for an NVML / ``torch.cuda.get_device_name`` name.

    ``NVIDIA H100 80GB HBM3`` is the SXM part, ``NVIDIA H100 PCIe`` the PCIe one, ``NVIDIA H100
    NVL`` the NVL one; ``NVIDIA A10G`` is not the A10; ``Tesla V100-SXM2-16GB`` a V100.
    """
    name = " ".join(device.upper().replace("-", " ").split())
    words = name.split()
    if "A10G" in words:
        return None
    for gpu in ("H100", "H200"):
        if gpu in words:
            if "NVL" in words:
                return f"{gpu} NVL"
            if gpu == "H100" and "PCIE" in words:
                return "H100 PCIe"
            return "H100 SXM" if gpu == "H100" else "H200"
    if "V100S" in words:
        return "V100S"
    if "V100" in words:
        return "V100 PCIe" if "PCIE" in words else "V100"
    if "RTX" in words and "A6000" in words:
        return "RTX A6000"
    for key in ("A100", "L40S", "L40", "L4", "A10", "T4"):
        if key in words:
            return key
    for key in ("4090", "3090"):
        if key in words and "TI" not in words:
            return f"RTX {key}"
    return None


class Peak(NamedTuple):
    """An accelerator's peak, or why it is unknown (``flops`` None)."""

    flops: float | None  # FLOP/s of one accelerator
    source: str  # "table: H100 SXM bf16", "TRAINCARD_PEAK_FLOPS", or why not known


def peak_flops(device: str | None, dtype: str = "bf16", environ: Mapping[str, str] | None = None) -> Peak:
    """The dense peak FLOP/s of one ``device`` (an NVML name; None: no accelerator) for ``dtype``.

    Raises:
        ConfigError: ``TRAINCARD_PEAK_FLOPS`` is set but is not a positive number.
    """
    raw = (os.environ if environ is None else environ).get(TRAINCARD_PEAK_FLOPS, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{TRAINCARD_PEAK_FLOPS}={raw!r}: give FLOP/s per accelerator, e.g. 3.12e14")
        return Peak(value, TRAINCARD_PEAK_FLOPS)
    if not device:
        return Peak(None, "no GPU (set TRAINCARD_PEAK_FLOPS to compare with a known peak)")
    key = _table_key(device)
    if key is None:
        return Peak(None, f"peak of {device} not known (set TRAINCARD_PEAK_FLOPS)")
    dtype = dtype.lower()
    figure = PEAK_TFLOPS[key].get(dtype)
    if figure is None:
        return Peak(None, f"{key} has no {dtype} figure (set TRAINCARD_PEAK_FLOPS)")
    return Peak(figure * 1e12, f"{key} {dtype} (vendor datasheet, dense)")


class ModelFlops(NamedTuple):
    """What the FLOPs-per-token formula needs of a model (see the module docstring)."""

    params: int  # trainable parameters
    layers: int | None
    hidden: int | None
    frozen: int = 0  # parameters that do not train

    @property
    def attention_per_position(self) -> float:
        """12 x L x d: the attention FLOPs per token for each position of the sequence (0 unknown)."""
        return 12.0 * self.layers * self.hidden if self.layers and self.hidden else 0.0

    def per_token(self, seq_len: float | None = None) -> float:
        """6 x trainable + 4 x frozen parameters, plus 12 x L x d x T when T (and L, d) are known."""
        dense = 6.0 * self.params + 4.0 * self.frozen
        return dense + (self.attention_per_position * seq_len if seq_len else 0.0)


_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HIDDEN = ("hidden_size", "n_embd", "d_model", "dim")


def _config_int(config: object, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_flops(model: Foreign, *, params: int | None = None) -> ModelFlops | None:
    """:class:`ModelFlops` of a torch module (its trainable parameters, its ``config``'s layers and
    hidden size when it has one, as HF models do) or of a config object with ``params`` given.
    None when neither tells the parameter count."""
    config = getattr(model, "config", model)
    parameters = getattr(model, "parameters", None)
    frozen = 0
    if params is None and callable(parameters):
        # parameters() yields a weight shared by two modules once, as the formula wants
        params = 0
        for p in parameters():
            if getattr(p, "requires_grad", False):
                params += int(p.numel())
            else:
                frozen += int(p.numel())
    if not params:
        return None
    return ModelFlops(params, _config_int(config, _LAYERS), _config_int(config, _HIDDEN), frozen)


def device_name(model: object) -> str | None:
    """The CUDA device name of ``model``'s first parameter (None on a CPU or without torch)."""
    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if callable(parameters) else None
    device = getattr(first, "device", None)
    if device is None or getattr(device, "type", None) != "cuda":
        return None
    import torch  # already imported by whoever built a CUDA tensor

    return str(torch.cuda.get_device_name(device))


_DTYPES: Final = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float8_e4m3fn": "fp8"}


def compute_dtype(model: object, mixed_precision: str | None = None) -> str:
    """The dtype ``model``'s matrix multiplications run in, for the peak table: ``mixed_precision``
    (Accelerate's ``"bf16"``, ``"fp16"``, ``"fp8"``) when set, else its first parameter's dtype,
    float32 counting as ``"tf32"`` where torch lets CUDA matmuls use TF32."""
    if mixed_precision in ("bf16", "fp16", "fp8"):
        return mixed_precision
    parameters = getattr(model, "parameters", None)
    first = next(iter(parameters()), None) if callable(parameters) else None
    dtype = str(getattr(first, "dtype", ""))
    if dtype in _DTYPES:
        return _DTYPES[dtype]
    if getattr(getattr(first, "device", None), "type", None) == "cuda":
        import torch  # already imported by whoever built a CUDA tensor

        if torch.backends.cuda.matmul.allow_tf32:
            return "tf32"
    return "fp32"


def mfu(flops_per_token: float, tokens_per_s: float, peak: float, accelerators: int = 1) -> float:
    """Model FLOPs utilisation: ``flops_per_token x tokens_per_s / (peak x accelerators)``."""
    return flops_per_token * tokens_per_s / (peak * max(accelerators, 1))


def training_fields(model: Foreign, dtype: str) -> dict[str, float | str | None]:
    """Progress fields an adapter reports at the start of training (``Reporter.progress``):
    ``flops_per_token`` (the dense term), ``attention_flops_per_position`` (12 x L x d, times the
    sequence length the card measures), ``compute_dtype`` (``dtype``: fp32, tf32, bf16, fp16,
    fp8), ``peak_flops`` of the model's accelerator (None when unknown) and ``peak_source``.
    Empty when the model's parameter count cannot be read."""
    m = model_flops(model)
    if m is None:
        return {}
    peak = peak_flops(device_name(model), dtype)
    return {
        "flops_per_token": m.per_token(),
        "attention_flops_per_position": m.attention_per_position,
        "compute_dtype": dtype,
        "peak_flops": peak.flops,
        "peak_source": peak.source,
    }


def model_fields(model: Foreign, mixed_precision: str | None = None) -> dict[str, float | str | None]:
    """:func:`training_fields` of a model the user handed over (``instrument(..., model=)``), in
    the dtype :func:`compute_dtype` reads; empty, with the error logged once, if it cannot be read."""
    try:
        return training_fields(model, compute_dtype(model, mixed_precision))
    except ConfigError:  # a bad TRAINCARD_PEAK_FLOPS: say so at start
        raise
    except Exception as exc:  # a model object of any kind: never an error in the user's set-up
        internal_error("model FLOPs", exc)
        return {}
