"""Names say one thing: wire types are named by the place they fill, and no wire type shares a name
with anything else in the package.

A wire type is a TypedDict: the shape of JSON that reaches the page or the store (the card payload,
the status snapshot, the task summary). Its name ends in ``Section`` (an object under a key) or
``Row`` (one element of a list); ``CardPayload`` is the whole payload. An analysis class, a queue
record or a type alias never carries a wire type's name, so no module has to rename one on import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from helpers import REPO

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
