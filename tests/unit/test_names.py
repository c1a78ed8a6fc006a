"""Names say one thing: wire types are named by the place they fill, no wire type shares a name with
anything else in the package, and each anomaly kind has one name, spelled in one place.

A wire type is a TypedDict: the shape of JSON that reaches the page or the store (the card payload,
the status snapshot, the task summary). Its name ends in ``Section`` (an object under a key) or
``Row`` (one element of a list); ``CardPayload`` is the whole payload. An analysis class, a queue
record or a type alias never carries a wire type's name, so no module has to rename one on import.

The anomaly kinds are defined once (``traincard_otel/_schema/anomaly_kinds.py``): the detector, the
``stop_on``/``notify_on`` settings, the card's labels, ``docs/schema.md`` and the alert rules take
them from there (``tests/integration/test_collector_config.py`` checks the rules).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from traincard_otel._config import NOTIFY_KINDS, STOP_KINDS
from traincard_otel._read.payload.insights import KIND_LABELS
from traincard_otel._schema import ANOMALY_KIND_NAMES, ANOMALY_KINDS, AnomalyKind, render_markdown

from tests.support.helpers import REPO

PACKAGE = REPO / "traincard_otel"
WIRE_SUFFIXES = ("Section", "Row")
WHOLE_DOCUMENTS = ("CardPayload",)


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _base_names(node: ast.ClassDef) -> list[str]:
    return [
        b.id if isinstance(b, ast.Name) else b.attr
        for b in node.bases
        if isinstance(b, ast.Name | ast.Attribute)
    ]


def _wire_types(tree: ast.Module) -> list[ast.ClassDef]:
    """The module's TypedDicts: classes based on TypedDict or on another TypedDict of the module."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    found: dict[str, ast.ClassDef] = {}
    grew = True
    while grew:
        grew = False
        for c in classes:
            if c.name not in found and any(b == "TypedDict" or b in found for b in _base_names(c)):
                found[c.name] = c
                grew = True
    return list(found.values())


def _other_names(tree: ast.Module, wire: set[str]) -> Iterator[tuple[str, int]]:
    """Classes and capitalised module-level aliases that are not wire types."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name not in wire:
            yield node.name, node.lineno
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets += [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name) and t.id[:1].isupper() and not t.id.isupper():
                yield t.id, node.lineno


def test_every_wire_type_ends_in_section_or_row() -> None:
    found, bad = 0, []
    for path, tree in _modules():
        for c in _wire_types(tree):
            found += 1
            public = not c.name.startswith("_")
            if public and c.name not in WHOLE_DOCUMENTS and not c.name.endswith(WIRE_SUFFIXES):
                bad.append(f"{path.relative_to(REPO)}:{c.lineno} {c.name}")
    assert found >= 50, "the TypedDict finder found too few"
    assert bad == [], f"name these ...Section (an object under a key) or ...Row (a list's element): {bad}"


def test_no_wire_type_shares_a_name_with_anything_else() -> None:
    wire: dict[str, list[str]] = {}
    others: dict[str, list[str]] = {}
    for path, tree in _modules():
        rel = str(path.relative_to(REPO))
        names = {c.name for c in _wire_types(tree)}
        for c in _wire_types(tree):
            wire.setdefault(c.name, []).append(f"{rel}:{c.lineno}")
        for name, line in _other_names(tree, names):
            others.setdefault(name, []).append(f"{rel}:{line}")
    twice = {n: where for n, where in wire.items() if len(where) > 1 and not n.startswith("_")}
    assert twice == {}, f"wire types defined twice: {twice}"
    shared = {n: wire[n] + others[n] for n in wire if n in others}
    assert shared == {}, f"wire types named like a class or alias elsewhere: {shared}"


def test_no_module_renames_a_wire_type_on_import() -> None:
    renamed = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("contract"):
                renamed += [
                    f"{path.relative_to(REPO)}: {a.name} as {a.asname}" for a in node.names if a.asname
                ]
    assert renamed == []


DEFINITION = PACKAGE / "_schema" / "anomaly_kinds.py"
# Names a kind once had: nothing may use them again (``nan`` was ``nonfinite`` to the detector).
RETIRED_KINDS = ("nonfinite",)


def _float_arguments(tree: ast.Module) -> set[int]:
    """The string constants passed to ``float(...)`` (``float("nan")`` is a number, not a kind)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return {id(a) for c in calls if isinstance(c.func, ast.Name) and c.func.id == "float" for a in c.args}


def test_each_anomaly_kind_is_defined_once_with_a_label_and_a_meaning() -> None:
    constants = {v for k, v in vars(AnomalyKind).items() if k.isupper()}
    assert sorted(constants) == sorted(ANOMALY_KIND_NAMES) and len(set(ANOMALY_KIND_NAMES)) == len(
        ANOMALY_KINDS
    )
    assert all(k.label and k.meaning for k in ANOMALY_KINDS)
    assert {k.name: k.label for k in ANOMALY_KINDS} == KIND_LABELS
    assert set(ANOMALY_KIND_NAMES) < set(STOP_KINDS) < set(NOTIFY_KINDS)
    page = render_markdown()
    assert all(f"| `{k.name}` | {k.label} | {k.meaning} |" in page for k in ANOMALY_KINDS)


def test_no_anomaly_kind_is_spelled_outside_its_definition() -> None:
    """The package names a kind through ``AnomalyKind`` (or the tuples derived from it), never as a
    string of its own; the card's script and styles never name one."""
    kinds = set(ANOMALY_KIND_NAMES) | set(RETIRED_KINDS)
    found = []
    for path, tree in _modules():
        if path == DEFINITION:
            continue
        numbers = _float_arguments(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in kinds and id(node) not in numbers:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    for asset in sorted((PACKAGE / "_read" / "card" / "assets").rglob("*")):
        if asset.suffix in (".js", ".css"):
            text = asset.read_text()
            found += [
                f"{asset.relative_to(REPO)} {k!r}" for k in kinds if f'"{k}"' in text or f"'{k}'" in text
            ]
    assert found == [], f"use AnomalyKind (traincard_otel/_schema/anomaly_kinds.py): {found}"


def test_no_page_or_rule_uses_a_retired_kind_name() -> None:
    pages = [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "collector-config").rglob("*.y*ml")),
    ]
    stale = [f"{p.relative_to(REPO)} {k}" for p in pages for k in RETIRED_KINDS if k in p.read_text()]
    assert stale == []


def test_a_store_written_with_a_retired_kind_name_reads_as_todays_kind() -> None:
    from traincard_otel import RunData
    from traincard_otel._analysis.analysis import recorded_anomalies
    from traincard_otel._schema import Attr, Event

    old = {
        "name": Event.ANOMALY,
        "time": 10.0,
        "attributes": {Attr.ANOMALY_KIND: "nonfinite", Attr.STEP: 7, Attr.METRIC_NAME: "loss"},
        "body": "loss is nan at step 7",
    }
    (found,) = recorded_anomalies(RunData(source="old", events=[old]))
    assert found.kind == AnomalyKind.NAN and found.step == 7
