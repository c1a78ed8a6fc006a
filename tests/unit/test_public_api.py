import subprocess
import sys

import traincard_otel


def test_public_names_are_pinned() -> None:
    assert sorted(traincard_otel.__all__) == sorted(
        [
            "ConfigError",
            "ItemMeter",
            "MissingDependencyError",
            "Phase",
            "Reporter",
            "RunData",
            "Series",
            "TraincardError",
            "__version__",
            "active_reporter",
            "configure",
            "instrument",
            "load",
            "shutdown",
        ]
    )
    for name in traincard_otel.__all__:
        assert getattr(traincard_otel, name) is not None


def test_import_pulls_in_no_heavy_framework() -> None:
    code = (
        "import sys, traincard_otel\n"
        "heavy = ('torch', 'transformers', 'lightning', 'pytorch_lightning', 'metaflow', 'pynvml',\n"
        "         'pyarrow', 'accelerate')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_instrument_rejects_unknown_objects_with_the_supported_list() -> None:
    import pytest

    with pytest.raises(TypeError, match=r"supported: .*transformers\.Trainer"):
        traincard_otel.instrument(object())
