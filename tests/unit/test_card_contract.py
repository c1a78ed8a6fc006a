"""Every field the card's script reads from the payload is one the payload's types declare.

The script's section files are read function by function: a variable bound to a payload section
(``var run = S.payload.run || {}``), to a field of a bound variable (``var g = ins.goodput``) or to
the items of a list (``logs.forEach(function (r) {...})``) takes that part's type from
``traincard_otel._read.payload.contract``, and each ``variable.field`` read afterwards must be a key
of that type. Fields typed as plain JSON objects are passed through as stored and not checked.
"""

from __future__ import annotations

import itertools
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files

from traincard_otel._read.card import page as _html
from traincard_otel._read.payload import contract, contract_doc

_FUNCTION = re.compile(r"^  function (\w+)\(([\w, ]*)\)", re.M)
_CALL = re.compile(r"(?<![\w.])(\w+)\((\w+)\)")
# ``var x = ...;`` and ``x = ...;`` (a reassignment rebinds, or unbinds, the name)
_BIND = re.compile(r"(?<![\w.])(\w+) = (?!=)([^;]*);")
_ITERATE = re.compile(
    r"\b([A-Za-z_]\w*(?:\.\w+)*)\s*(?:\|\|\s*\[\]\s*\))?\s*\.(?:forEach|filter|map|some|every|find)\("
    r"function \((\w+)"
)
_PATH = re.compile(r"\b(S\.payload|[A-Za-z_]\w*)((?:\.[a-z_][a-z_0-9]*)+)")
_OPAQUE = object()  # a JSON object passed through as stored


@dataclass
class Violation:
    file: str
    function: str
    read: str
    where: str


def _strip(tp: object) -> object:
    """``X | None`` -> ``X``."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else tp
    return tp


def _fields(tp: object) -> dict[str, object] | None:
    """The keys of a TypedDict (with their types), else None."""
    tp = _strip(tp)
    if isinstance(tp, type) and typing.is_typeddict(tp):
        return typing.get_type_hints(tp)
    return None


def _item(tp: object) -> object:
    tp = _strip(tp)
    if typing.get_origin(tp) in (list, Sequence) and typing.get_args(tp):
        return typing.get_args(tp)[0]
    return _OPAQUE


def _field(tp: object, name: str) -> object:
    """The type of ``tp.name``; raises KeyError if ``tp`` is a TypedDict without ``name``."""
    fields = _fields(tp)
    if fields is None:
        return _OPAQUE
    return fields[name]


def check_script(
    name: str, js: str, params: dict[str, object] | None = None
) -> tuple[list[Violation], int, dict[str, object]]:
    """(reads of undeclared fields, number of reads checked, the type passed to each one-argument
    function called with a bound variable) in one section file; ``params`` gives such functions'
    parameter its type."""
    payload = contract.CardPayload
    violations: list[Violation] = []
    checked = 0
    calls: dict[str, object] = {}
    starts = [m.start() for m in _FUNCTION.finditer(js)] + [len(js)]
    for start, end in itertools.pairwise(starts):
        body = js[start:end]
        function = _FUNCTION.match(body)
        bound: dict[str, object] = {}
        if function and function.group(1) in (params or {}) and function.group(2):
            bound[function.group(2).split(",")[0].strip()] = (params or {})[function.group(1)]
        events: list[tuple[int, str, re.Match[str]]] = [(m.start(), "call", m) for m in _CALL.finditer(body)]
        events += [(m.start(), "bind", m) for m in _BIND.finditer(body)]
        events += [(m.start(), "iterate", m) for m in _ITERATE.finditer(body)]
        events += [(m.start(), "read", m) for m in _PATH.finditer(body)]
        for _pos, kind, m in sorted(events, key=lambda e: (e[0], e[1] != "read")):
            if kind == "call":
                if m.group(2) in bound:
                    calls[m.group(1)] = bound[m.group(2)]
            elif kind == "read":
                root, path = m.group(1), m.group(2).split(".")[1:]
                tp = payload if root == "S.payload" else bound.get(root)
                if tp is None:
                    continue
                for part in path:
                    if _fields(tp) is None:
                        break
                    checked += 1
                    try:
                        tp = _field(tp, part)
                    except KeyError:
                        where = f"{root}.{'.'.join(path)}"
                        violations.append(
                            Violation(name, function.group(1) if function else "?", part, where)
                        )
                        break
            elif kind == "bind":
                target, rhs = m.group(1), m.group(2)
                found = _resolve_first(rhs, bound, payload)
                if found is not None:
                    bound[target] = found
                else:
                    bound.pop(target, None)
            else:
                source = _resolve_path(m.group(1), bound, payload)
                if source is not None:
                    element = _item(source)
                    if element is not _OPAQUE:
                        bound[m.group(2)] = element
    return violations, checked, calls


def check_all(scripts: dict[str, str]) -> tuple[list[Violation], int]:
    """Every section file, with the types that calls pass between functions (to a fixed point)."""
    params: dict[str, object] = {}
    while True:
        violations: list[Violation] = []
        checked = 0
        found: dict[str, object] = {}
        for name, js in scripts.items():
            v, n, calls = check_script(name, js, params)
            violations += v
            checked += n
            found.update(calls)
        if found.items() <= params.items():
            return violations, checked
        params.update(found)


def _resolve_path(expr: str, bound: dict[str, object], payload: object) -> object | None:
    parts = expr.split(".")
    if parts[:2] == ["S", "payload"]:
        tp, rest = payload, parts[2:]
    elif parts[0] in bound:
        tp, rest = bound[parts[0]], parts[1:]
    else:
        return None
    for part in rest:
        if _fields(tp) is None or part not in (_fields(tp) or {}):
            return None
        tp = _field(tp, part)
    return tp


def _resolve_first(rhs: str, bound: dict[str, object], payload: object) -> object | None:
    """The type of the first payload part ``rhs`` names (``S.payload...`` or a bound variable's
    field); None when that part is not a typed one (``list.map(...)``: a new kind of value)."""
    for m in _PATH.finditer(rhs):
        expr = m.group(1) + m.group(2)
        if (expr.startswith("S.payload") and expr != "S.payload") or expr.split(".")[0] in bound:
            return _resolve_path(expr, bound, payload)
    return None


def _section_files() -> dict[str, str]:
    folder = files("traincard_otel._read.card") / "assets" / "card"
    return {f"{n}.js": (folder / f"{n}.js").read_text(encoding="utf-8") for n in _html.CARD_SCRIPTS}


def test_every_field_the_script_reads_is_declared() -> None:
    violations, checked = check_all(_section_files())
    assert violations == []
    assert checked >= 100, checked  # the check reads the script, not nothing


def test_the_check_fails_on_a_field_no_type_declares() -> None:
    js = (
        "  function renderThing() {\n"
        "    var run = S.payload.run || {};\n"
        "    var ok = run.eta_s, bad = run.eta_seconds;\n"
        "    (S.payload.logs || []).forEach(function (r) { use(r.message, r.msg); });\n"
        "    var g = S.payload.insights.goodput;\n"
        "    g.categories.forEach(function (c) { use(c.seconds, c.secs); });\n"
        "    return S.payload.no_such_section;\n"
        "  }\n"
    )
    js += "  function renderMore(ins) { return ins.goodput.wall_s + ins.goodput.wall; }\n"
    js += "  function caller() { var ins = S.payload.insights; renderMore(ins); }\n"
    violations, _checked = check_all({"x.js": js})
    assert sorted(v.read for v in violations) == ["eta_seconds", "msg", "no_such_section", "secs", "wall"]


def test_the_payload_page_ends_with_the_generated_contract() -> None:
    from tests.support.helpers import REPO

    page = (REPO / "docs" / "card-payload.md").read_text(encoding="utf-8")
    assert page.endswith("\n\n" + contract_doc.render_markdown()), (
        "docs/card-payload.md is stale: replace its last part with "
        "`python -m traincard_otel._read.payload.contract_doc`"
    )


def test_every_section_of_a_real_payload_has_its_declared_keys() -> None:
    """A payload built from a stored run has exactly the keys its types declare (required ones)."""
    from traincard_otel._read.payload import build_payload

    from tests.support.runs import hf_run

    for live in (False, True):
        payload = build_payload(hf_run(), live=live)
        assert set(payload) == set(typing.get_type_hints(contract.CardPayload))
        for section in ("run", "names", "insights", "log_info", "system", "empty", "stats"):
            tp = typing.get_type_hints(contract.CardPayload)[section]
            assert set(payload[section]) == set(tp.__required_keys__) | (
                set(payload[section]) & tp.__optional_keys__
            )


def _undeclared(value: object, tp: object, path: str) -> list[str]:
    """Keys in ``value`` that its type does not declare, anywhere inside it."""
    fields = _fields(tp)
    if fields is not None and isinstance(value, dict):
        out = [f"{path}.{k}" for k in value if k not in fields]
        for k, v in value.items():
            if k in fields:
                out += _undeclared(v, fields[k], f"{path}.{k}")
        return out
    element = _item(tp)
    if element is not _OPAQUE and isinstance(value, list):
        return [bad for i, v in enumerate(value[:50]) for bad in _undeclared(v, element, f"{path}[{i}]")]
    return []


def test_the_browser_tests_hand_made_payloads_fit_the_contract() -> None:
    """The page is tested in Chromium with hand-made payloads: they use only declared fields, so a
    field the tests draw is one the builders must produce."""
    from tests.support import payloads

    made = [
        payloads.running_payload(),
        payloads.failed_payload(),
        payloads.final_payload(),
        payloads.empty_payload(),
        payloads.xss_payload(),
    ]
    for payload in made:
        assert _undeclared(payload, contract.CardPayload, "payload") == []
    assert _undeclared({"run": {"eta": 1}}, contract.CardPayload, "p") == ["p.run.eta"]
