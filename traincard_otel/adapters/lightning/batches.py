"""Reading a Lightning batch (its samples and tokens) and a Trainer's precision and model, for
the step ends and the FLOPs per token."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from ..._analysis.flops import compute_dtype
from ..._types import Foreign


def batch_reader(batch: Foreign) -> tuple[tuple[object, ...], bool] | None:
    """Where a batch's size is read: the keys and indices from the batch to the tensor whose
    leading dimension counts its samples (``input_ids``, else the first tensor found), and
    whether that tensor holds token ids (``input_ids``, or an integer tensor of two dimensions,
    batch by sequence: its element count is the batch's tokens). None: no tensor in it."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        if not len(shape):
            return None
        return (), len(shape) == 2 and getattr(batch, "dtype", None) in _token_dtypes()
    keys: Iterable[object]
    if isinstance(batch, Mapping):
        if len(getattr(batch.get("input_ids"), "shape", ())) >= 2:
            return ("input_ids",), True
        keys = list(batch)
    elif isinstance(batch, (list, tuple)):
        keys = range(len(batch))
    else:
        return None
    for key in keys:
        inner = batch_reader(batch[key])
        if inner is not None:
            return (key, *inner[0]), inner[1]
    return None


@functools.cache
def _token_dtypes() -> frozenset[Foreign]:
    """The dtypes of token ids (torch is imported: Lightning, which built the batch, imports it)."""
    torch = sys.modules["torch"]
    return frozenset((torch.int64, torch.int32, torch.int16))


def precision_dtype(precision: str, module: Foreign) -> str:
    """The dtype of the matrix multiplications for a Trainer's ``precision`` ("bf16-mixed",
    "16-true", "transformer-engine", "64-true", "32-true", ...), as the peak table names it: bf16,
    fp16, fp8, fp64 (no table figure: an unknown peak, rather than a 32-bit one), and for 32-bit
    precision what :func:`~traincard_otel._analysis.flops.compute_dtype` reads from the module
    (fp32, or tf32 where CUDA matmuls may use it)."""
    precision = str(precision)
    for prefix, dtype in (("bf16", "bf16"), ("16", "fp16"), ("transformer-engine", "fp8"), ("64", "fp64")):
        if precision.startswith(prefix):
            return dtype
    return compute_dtype(module)


class _ModelView(NamedTuple):
    """A LightningModule's parameters (the wrapped transformer's and any head's) with the config
    of the transformer it wraps, for the FLOPs per token."""

    parameters: Callable[[], Iterator[Foreign]]
    config: Foreign


def flops_model(module: Foreign) -> Foreign:
    """What :func:`training_fields` reads for ``module``: the module itself when it has a
    ``config`` (or wraps nothing with one), else its parameters with the ``config`` of the first
    submodule that has one (an HF model held as ``module.model``, say)."""
    if getattr(module, "config", None) is not None:
        return module
    for sub in module.modules():
        config = getattr(sub, "config", None)
        if config is not None:
            return _ModelView(module.parameters, config)
    return module
