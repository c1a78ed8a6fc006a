"""The package's folders stack as layers: a module imports only from its own layer or below.

Data flows one way (training thread -> queue -> converter -> OTel SDK -> exporters -> store
writer -> datastore -> reader -> analysis -> card), and so do imports: a lower layer never imports
a higher one, not even lazily inside a function, and no modules import each other in a circle.
What a run recorded (``RunData``, ``Series``) is plain data at the foundation; the store fills it
and the analysis (``_insights``) reads it, so neither knows the other.
docs/architecture.md draws the same stack.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "traincard_otel"

# Bottom to top. A module belongs to the first layer with a prefix that matches its dotted name.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "_version",
            "exceptions",
            "environment_variables",
            "_safety",
            "_optional",
            "_schema",
            "_types",
            "_config",
            "_identity",
            "_queue",
            "_data",
        ),
    ),
    ("store", ("_store",)),
    ("insights", ("_insights",)),
    ("load", ("_targets", "_load", "_run", "_sweep")),
    ("telemetry", ("_telemetry",)),
    ("exporters", ("exporters",)),
    ("converter", ("_convert", "_logbridge")),
    ("pipeline", ("_pipeline",)),
    ("card", ("_card",)),
    ("api", ("_reporter", "metaflow.refresher", "metaflow.live_sweep")),
    (
        "front",
        (
            "_instrument",
            "adapters",
            "metaflow",
            "_cli",
            "_cli_ask",
            "__main__",
            "testing",
            "torchrun",
            "__init__",
        ),
    ),
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    for i, (_name, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"traincard_otel.{module} is in no layer: add it to LAYERS and docs/architecture.md")


def _imports(path: Path) -> set[str]:
    """Package modules ``path`` imports (relative or absolute, at any depth of the file)."""
    me = _module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("traincard_otel"):
                target = node.module.removeprefix("traincard_otel").lstrip(".")
            else:
                continue
            names = [f"{target}.{a.name}".lstrip(".") for a in node.names]
            for name in names:  # `from . import x` imports module x; `from .m import f` imports m
                out.add(
                    name
                    if (PACKAGE / name.replace(".", "/")).exists()
                    or (PACKAGE / f"{name.replace('.', '/')}.py").exists()
                    else target
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("traincard_otel."):
                    out.add(alias.name.removeprefix("traincard_otel."))
    out.discard("")
    out.discard(me)
    return out


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_module_imports_from_a_higher_layer() -> None:
    wrong = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
        for m, targets in sorted(_graph().items())
        for t in sorted(targets)
        if _layer(t) > _layer(m)
    ]
    assert wrong == []


def test_the_store_knows_neither_the_analysis_nor_the_card() -> None:
    wrong = [
        f"{m} imports {t}"
        for m, targets in sorted(_graph().items())
        if m.startswith("_store")
        for t in sorted(targets)
        if t.startswith(("_insights", "_card"))
    ]
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = _graph()
    # Package __init__ modules re-export their own submodules; an edge into a package means its
    # __init__, which is not a circle through the submodule itself.
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue  # a package and its own submodules
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []
