"""The package's folders stack as layers, on two sides of the store, and data takes no back-channel.

Data flows one way: the write side (report -> convert -> export -> store writer) turns what training
reports into the store; the read side (locate -> load -> analyse -> payload -> card) turns a store
into a page. Imports follow the flow: a module imports only from its own layer or below, never
lazily either, no modules import each other in a circle, and neither side imports the other: what
both need (the store's formats and backends, the analysis, the wire schema, RunData) lies below
both. docs/architecture.md draws the same stack and describes the walk of ``traincard render``.

And no value travels by a hidden route: no module writes ``os.environ`` to pass a value on (only
the set-up of the processes a step starts does), no reader writes into a store, the writer reads
its store back only where the store is the control channel (requests, rank liveness) or to merge
its own parts, and nothing patches another module at import time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.helpers import REPO

PACKAGE = REPO / "traincard_otel"

FOUNDATION = (
    "_version",
    "exceptions",
    "environment_variables",
    "_safety",
    "_gil",
    "_optional",
    "_schema",
    "_types",
    "_config",
    "_identity",
    "_data",
    "_text",
)
WRITE = (
    "_write.queue",
    "_write.store",
    "_write.telemetry",
    "_write.export",
    "_write.convert",
    "_write.pipeline",
    "_write.report",
)
READ = ("_read.locate", "_read.load", "_read.payload", "_read.card", "_read.api")
FRONT = (
    "_configure",
    "_instrument",
    "_autolog",
    "integrations",
    "instrumentor",
    "adapters",
    "metaflow",
    "exporters",
    "_cli",
    "_cli_ask",
    "__main__",
    "testing",
    "torchrun",
    "__init__",
)

# Bottom to top; each entry is one layer, each folder or module in exactly one of them. The read
# side's last layer is its entry points (load(), sweep(), the baseline, the render walk).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", FOUNDATION),
    ("store", ("_store",)),
    ("analysis", ("_analysis",)),
    *((name.replace("_write.", "write: "), (name,)) for name in WRITE),
    *((name.replace("_read.", "read: "), (name,)) for name in READ),
    ("front", FRONT),
)
#: Modules of the read side's entry layer (``_read.api`` above).
READ_API = ("_read.baseline", "_read.run", "_read.sweep", "_read.render")
#: Package ``__init__`` modules of the two sides: docstrings only.
SIDE_PACKAGES = ("_write", "_read")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _layer(module: str) -> int:
    if module in SIDE_PACKAGES:
        return 0
    if any(_matches(module, m) for m in READ_API):
        module = "_read.api"
    for i, (_name, prefixes) in enumerate(LAYERS):
        if any(_matches(module, p) for p in prefixes):
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
            for alias in node.names:  # `from . import x` imports module x; `from .m import f` imports m
                name = f"{target}.{alias.name}".lstrip(".")
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


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield _module_name(path), path


def _graph() -> dict[str, set[str]]:
    return {name: _imports(path) for name, path in _modules()}


def test_every_folder_is_in_exactly_one_layer() -> None:
    prefixes = [p for _name, group in LAYERS for p in group]
    assert len(prefixes) == len(set(prefixes))
    for name, _path in _modules():
        _layer(name)  # raises for a module in no layer


def test_no_module_imports_from_a_higher_layer() -> None:
    wrong = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
        for m, targets in sorted(_graph().items())
        for t in sorted(targets)
        if _layer(t) > _layer(m)
    ]
    assert wrong == []


def test_neither_side_of_the_store_imports_the_other() -> None:
    wrong = [
        f"{m} imports {t}"
        for m, targets in sorted(_graph().items())
        for t in sorted(targets)
        if (_matches(m, "_write") and _matches(t, "_read"))
        or (_matches(m, "_read") and _matches(t, "_write"))
    ]
    assert wrong == []


def test_the_store_and_the_analysis_know_neither_side() -> None:
    wrong = [
        f"{m} imports {t}"
        for m, targets in sorted(_graph().items())
        if m.startswith(("_store", "_analysis", "_data", "_schema"))
        for t in sorted(targets)
        if t.startswith(("_write", "_read", "metaflow", "adapters"))
    ]
    assert wrong == []


def test_the_card_and_its_payload_only_draw_what_was_read() -> None:
    """The payload and the page turn analysed data into a page: no store, no locating, no loading."""
    wrong = [
        f"{m} imports {t}"
        for m, targets in sorted(_graph().items())
        if m.startswith(("_read.card", "_read.payload"))
        for t in sorted(targets)
        if t.startswith(("_store", "_read.load", "_read.locate"))
    ]
    assert wrong == []


def _environ_writes(tree: ast.AST) -> list[int]:
    """Lines that change ``os.environ`` (item assignment or deletion, update/setdefault/pop/clear)."""

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            lines += [node.lineno for t in targets if isinstance(t, ast.Subscript) and is_environ(t.value)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and (
                (
                    node.func.attr in ("update", "setdefault", "pop", "clear", "__setitem__")
                    and is_environ(node.func.value)
                )
                or node.func.attr == "putenv"
            )
        ):
            lines.append(node.lineno)
    return lines


#: The only modules that change os.environ: they set up the processes a step or a rank starts
#: (torchrun and accelerate children, a gang's ranks, multiprocessing workers), which read their
#: settings from it. No module passes a value to another module of its own process this way.
CHILD_PROCESS_SET_UP = ("metaflow.decorator", "_write.pipeline.children")


def test_no_module_passes_a_value_through_the_environment() -> None:
    wrong = [
        f"{name}:{line}"
        for name, path in _modules()
        if name not in CHILD_PROCESS_SET_UP
        for line in _environ_writes(ast.parse(path.read_text()))
    ]
    assert wrong == []


def _calls(tree: ast.AST, methods: set[str], functions: frozenset[str] = frozenset()) -> list[str]:
    """Calls of a method named in ``methods`` (``x.m(...)``) or a function in ``functions``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in methods | functions) or (
            isinstance(func, ast.Name) and func.id in functions
        ):
            found.append(f"{ast.unparse(func)}:{node.lineno}")
    return found


#: What writes into a store: a backend's methods, and the calls that have whole objects written (the
#: gang's markers; a store writer's state and summary, and its flush).
STORE_WRITES = {"write", "delete"}, frozenset({"write_markers", "set_summary", "set_state", "flush_now"})
#: What reads a store: a backend's methods.
STORE_READS = {"read_many", "list"}


#: A reader: the read side, and the Metaflow side's live card (it reads the store and draws).
READERS = ("_read", "metaflow.refresher", "metaflow.live_sweep", "metaflow.card")
#: Where the writer reads its store: the store as the control channel (decision 14): requests to a
#: running rank (``traincard stacks``, ``traincard profile``: the watchdog's poll), and the other
#: ranks' liveness (a gang's, on its control node).
CONTROL_CHANNEL = ("_write.telemetry.health", "_write.telemetry.stack_watch", "_write.telemetry.gang_watch")
#: Where the writer reads back objects it wrote itself to rewrite them: the tiered merge of its
#: parts (upkeep of its objects; nothing read there reaches the run's telemetry or a decision).
UPKEEP = ("_write.store.merge",)


def test_a_reader_never_writes_into_a_store() -> None:
    wrong = [
        f"{name} {call}"
        for name, path in _modules()
        if any(_matches(name, r) for r in READERS)
        for call in _calls(ast.parse(path.read_text()), *STORE_WRITES)
    ]
    assert wrong == []


def test_the_writer_reads_its_store_only_as_the_control_channel() -> None:
    wrong = [
        f"{name} {call}"
        for name, path in _modules()
        if _matches(name, "_write") and name not in CONTROL_CHANNEL + UPKEEP
        for call in _calls(ast.parse(path.read_text()), STORE_READS)
    ]
    assert wrong == []


def test_nothing_patches_another_module_at_import_time() -> None:
    """A module-level assignment to an attribute of something imported (``_run.renderer = f``)
    wires modules behind the import graph's back."""
    wrong = []
    for name, path in _modules():
        tree = ast.parse(path.read_text())
        imported = {
            (a.asname or a.name).split(".")[0]
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for a in node.names
        }
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in imported:
                    wrong.append(f"{name}:{node.lineno}")
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
