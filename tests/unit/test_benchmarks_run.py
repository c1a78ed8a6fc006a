"""The benchmark scripts run (tiny configurations); their timings are not asserted here."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import benchmarks

NAMES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))


def test_there_are_benchmarks() -> None:
    assert {"bench_hot_path", "bench_end_to_end", "bench_card_render"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_quick(name: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TRAINCARD_DIR", str(tmp_path / "store"))
    out = importlib.import_module(f"benchmarks.{name}").main(["--quick", "--json", str(tmp_path / "r.json")])
    assert out and "error" not in out
    assert (tmp_path / "r.json").read_text().startswith("{")
