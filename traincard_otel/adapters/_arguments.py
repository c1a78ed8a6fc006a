"""The ``TrainingArguments`` a user set: the hyperparameters the Hugging Face adapter reports.

Apart from the adapter so that reading them imports no framework.
"""

from __future__ import annotations

import dataclasses
import enum

# Arguments that name places or runs, not settings: they differ from their defaults in every run.
_NOT_HYPERPARAMETERS = frozenset({"output_dir", "logging_dir", "run_name", "hub_model_id", "hub_token"})


def changed_arguments(args: object) -> dict[str, object]:
    """The ``TrainingArguments`` fields whose value differs from the field's default (scalars only):
    the run's hyperparameters as the user chose them, without the hundred-odd defaults."""
    if not dataclasses.is_dataclass(args):
        return {}
    out: dict[str, object] = {}
    for field in dataclasses.fields(args):
        if field.name.startswith("_") or field.name in _NOT_HYPERPARAMETERS:
            continue
        if field.default is not dataclasses.MISSING:
            default: object = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            continue
        value = getattr(args, field.name, None)
        if isinstance(value, enum.Enum):
            value = value.value  # lr_scheduler_type, save_strategy...
        if isinstance(default, enum.Enum):
            default = default.value
        if default is None and not value:
            continue  # left unset, then resolved by __post_init__ (disable_tqdm, ...)
        if isinstance(value, (int, float, str, bool)) and value != default:
            out[field.name] = value
    return out
