"""Small parts: no module of the package over 400 lines, no class over 300.

The one exception is a declarative module: a module of TypedDicts and nothing else (its docstring,
its imports, and classes whose bodies are only a docstring and field declarations), such as the
card payload's contract, which may grow with the payload since each line there is one field.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.helpers import REPO

PACKAGE = REPO / "traincard_otel"
MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 300


def _is_declaration(node: ast.stmt, typed_dicts: set[str]) -> bool:
    """A docstring, an import, or a TypedDict whose body only declares its fields."""
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return True
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if not isinstance(node, ast.ClassDef):
        return False
    bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
    if not bases or not bases <= {"TypedDict"} | typed_dicts:
        return False
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    if not all(isinstance(s, ast.AnnAssign) and s.value is None for s in body):
        return False
    typed_dicts.add(node.name)
    return True


def is_declarative(tree: ast.Module) -> bool:
    """Whether a module holds only TypedDict declarations (besides its docstring and imports)."""
    typed_dicts: set[str] = set()
    return all(_is_declaration(node, typed_dicts) for node in tree.body)


def oversized(root: Path) -> tuple[list[str], list[str]]:
    """The modules (not declarative) and the classes under ``root`` that are too long."""
    modules, classes = [], []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        rel = path.relative_to(root)
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and not is_declarative(tree):
            modules.append(f"{rel}: {lines} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_CLASS_LINES:
                    classes.append(f"{rel}:{node.lineno} {node.name}: {length} lines")
    return modules, classes


def test_no_module_over_400_lines_and_no_class_over_300() -> None:
    modules, classes = oversized(PACKAGE)
    assert modules == [], f"split these modules (at most {MAX_MODULE_LINES} lines): {modules}"
    assert classes == [], f"split these classes (at most {MAX_CLASS_LINES} lines): {classes}"


def test_only_a_module_of_typed_dicts_counts_as_declarative() -> None:
    contract = ast.parse((PACKAGE / "_read" / "payload" / "contract.py").read_text())
    assert is_declarative(contract)
    with_function = ast.parse(
        '"""doc"""\nfrom typing import TypedDict\nclass A(TypedDict):\n    x: int\ndef f(): pass\n'
    )
    with_method = ast.parse(
        "from typing import TypedDict\nclass A(TypedDict):\n    x: int\n    def f(self): pass\n"
    )
    not_typed = ast.parse("class A:\n    x: int\n")
    inherited = ast.parse(
        "from typing import TypedDict\nclass A(TypedDict):\n    x: int\n"
        "class B(A, total=False):\n    y: str\n"
    )
    assert not is_declarative(with_function) and not is_declarative(with_method)
    assert not is_declarative(not_typed) and is_declarative(inherited)


def test_the_size_check_finds_a_long_module_and_a_long_class(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("\n".join(f"x{i} = {i}" for i in range(MAX_MODULE_LINES + 1)))
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "wide.py").write_text(f"class Wide:\n{body}\n")
    fields = "\n".join(f"    x{i}: int" for i in range(MAX_MODULE_LINES))
    (tmp_path / "fields.py").write_text(
        f"from typing import TypedDict\n\n\nclass Fields(TypedDict):\n{fields}\n"
    )
    modules, classes = oversized(tmp_path)
    assert modules == [f"long.py: {MAX_MODULE_LINES + 1} lines"]
    # the declarative module is no long module; its one class of 401 lines is still a long class
    assert sorted(classes) == [
        f"fields.py:4 Fields: {MAX_MODULE_LINES + 1} lines",
        f"wide.py:1 Wide: {MAX_CLASS_LINES + 1} lines",
    ]
