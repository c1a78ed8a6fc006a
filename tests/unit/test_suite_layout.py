"""The suite's own shape (docs/testing.md): shared code comes from ``tests.support``, no test module
edits ``sys.path`` or imports another test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _findings(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.path":
            found.append(f"{node.lineno}: sys.path")
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [f"{node.lineno}: imports {n}" for n in names if n.split(".")[0].startswith("test_")]
    return found


def test_no_test_edits_the_path_or_imports_another_test_module() -> None:
    found = {
        str(path.relative_to(TESTS)): hits
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != Path(__file__).name and (hits := _findings(path))
    }
    assert found == {}
