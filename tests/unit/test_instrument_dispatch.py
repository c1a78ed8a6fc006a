"""instrument() dispatch: supported frameworks, unsupported versions fail loudly at set-up."""

from __future__ import annotations

from pathlib import Path

import pytest

import traincard_otel
from traincard_otel.exceptions import TraincardError


def test_unsupported_transformers_version_names_the_supported_range(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    from traincard_otel.adapters import huggingface

    from examples.tiny_gpt2 import trainer as make_trainer

    trainer = make_trainer(str(tmp_path / "out"), max_steps=1)
    monkeypatch.setattr(huggingface.transformers, "__version__", "4.2.0")
    with pytest.raises(TraincardError, match=r"transformers 4\.2\.0 is too old.*>= 4\.40"):
        traincard_otel.instrument(trainer)


def test_unsupported_objects_list_what_is_supported() -> None:
    with pytest.raises(TypeError, match=r"Lightning|lightning") as info:
        traincard_otel.instrument("a string")
    assert "accelerate.Accelerator" in str(info.value) and "torch.optim.Optimizer" in str(info.value)
