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
            "autolog",
            "configure",
            "instrument",
            "load",
            "shutdown",
            "sweep",
        ]
    )
    for name in traincard_otel.__all__:
        assert getattr(traincard_otel, name) is not None


def test_import_pulls_in_no_heavy_framework() -> None:
    """Nor do the integrations module and autolog(), whose hooks wait for a framework's import."""
    code = (
        "import sys, traincard_otel, traincard_otel.integrations\n"
        "traincard_otel.autolog()\n"
        "assert sorted(traincard_otel.integrations.__all__) == sorted(dir(traincard_otel.integrations))\n"
        "heavy = ('torch', 'transformers', 'lightning', 'pytorch_lightning', 'metaflow', 'pynvml',\n"
        "         'pyarrow', 'accelerate')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_reading_a_run_imports_nothing_that_reports() -> None:
    """load() and the traincard command import neither the write side nor the OTel SDK: the facade
    imports what reports when it is first named, and then hands out the same objects."""
    code = (
        "import sys, traincard_otel, traincard_otel._cli\n"
        "traincard_otel.load, traincard_otel.RunData\n"
        "reporting = ('traincard_otel._write', 'opentelemetry')\n"
        "print(','.join(m for m in sys.modules if m.startswith(reporting)))\n"
        "from traincard_otel._write.report.reporter import Reporter\n"
        "assert traincard_otel.Reporter is Reporter and 'Reporter' in dir(traincard_otel)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_instrument_rejects_unknown_objects_with_the_supported_list() -> None:
    import pytest

    with pytest.raises(TypeError, match=r"supported: .*transformers\.Trainer"):
        traincard_otel.instrument(object())


def test_the_testing_module_example_uses_public_names_and_runs() -> None:
    """traincard_otel.testing's docstring example imports only public modules, and passes."""
    import ast
    import textwrap

    import traincard_otel.testing

    doc = traincard_otel.testing.__doc__ or ""
    example = textwrap.dedent(doc.split("Example (pytest)::", 1)[1].split("\n\nInside", 1)[0])
    tree = ast.parse(example)
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert imported and all(not part.startswith("_") for m in imported for part in m.split(".")), imported
    attributes = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    assert not [a for a in attributes if a.startswith("_")], attributes

    def train(reporter: traincard_otel.Reporter, steps: int) -> None:
        for step in range(1, steps + 1):
            reporter.metrics({"loss": 1.0 / step}, step=step)
            reporter.step_end(step)

    namespace: dict[str, object] = {"train": train}
    exec(compile(tree, "traincard_otel/testing.py", "exec"), namespace)
    namespace["test_my_training_loop_reports_loss"]()  # type: ignore[operator]


def test_a_class_of_the_integrations_names_the_extra_its_framework_needs() -> None:
    """With a framework missing, the module imports and a class's name raises the install hint."""
    code = (
        "import sys\n"
        "for name in ('transformers', 'lightning', 'pytorch_lightning', 'accelerate',\n"
        "             'opentelemetry.instrumentation'):\n"
        "    sys.modules[name] = None  # as if not installed\n"
        "import traincard_otel.integrations as integrations\n"
        "from traincard_otel import MissingDependencyError\n"
        "for name, extra in (('HFCallback', 'hf'), ('LightningCallback', 'lightning'),\n"
        "                    ('AccelerateTracker', 'accelerate')):\n"
        "    try:\n"
        "        getattr(integrations, name)\n"
        "    except MissingDependencyError as exc:\n"
        '        assert f"traincard-otel[{extra}]" in str(exc), exc\n'
        "    else:\n"
        "        raise AssertionError(name)\n"
        "try:\n"
        "    import traincard_otel.instrumentor\n"
        "except MissingDependencyError as exc:\n"
        "    assert 'traincard-otel[instrument]' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('instrumentor')\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_autolog_refuses_a_setting_configure_does_not_take_and_holds_nothing() -> None:
    import pytest

    from traincard_otel import _autolog

    with pytest.raises(TypeError, match="flush_every"):
        traincard_otel.autolog(flush_every=1)
    assert _autolog._FINDER not in sys.meta_path and not _autolog._owners
