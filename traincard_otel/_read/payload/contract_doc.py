"""The reference part of ``docs/card-payload.md``, generated from the payload's contract
(``python -m traincard_otel._read.payload.contract_doc``)."""

from __future__ import annotations

import typing

from . import contract


def render_markdown() -> str:
    """Every section type of :mod:`.contract` and its fields, as the page's last part."""
    out = [
        "## The contract (generated)",
        "",
        "Generated from `traincard_otel/_read/payload/contract.py` (everything below this heading is",
        "`python -m traincard_otel._read.payload.contract_doc`; `tests/unit/test_card_contract.py` fails",
        "if it is stale, or if the card's script reads a field these types do not declare). A field",
        "marked optional may be absent.",
        "",
    ]
    for name, tp in vars(contract).items():
        if name.startswith("_") or not (isinstance(tp, type) and typing.is_typeddict(tp)):
            continue
        hints = {k: getattr(v, "__forward_arg__", v) for k, v in tp.__annotations__.items()}
        doc = " ".join((tp.__doc__ or "").split()).replace("``", "`")
        out += [f"### `{name}`", ""] + ([doc, ""] if doc else [])
        out += ["| field | type |", "|---|---|"]
        for field, hint in hints.items():
            optional = " (optional)" if field in getattr(tp, "__optional_keys__", ()) else ""
            out.append(f"| `{field}`{optional} | `{hint}` |".replace(" | None", " \\| None"))
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render_markdown(), end="")
