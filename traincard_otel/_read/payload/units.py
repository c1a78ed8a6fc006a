"""The unit every chart and summary row shows, inferred from a training metric's name.

Training scalars carry no unit on the wire, so the card names one from common conventions and
says "1" (dimensionless, as in OTel/UCUM) for the rest: a chart never shows no unit at all.
"""

from __future__ import annotations

import re

DIMENSIONLESS = "1"

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"tokens?_per_second$"), "tokens/s"),
    (re.compile(r"samples?_per_second$"), "samples/s"),
    (re.compile(r"steps?_per_second$"), "steps/s"),
    (re.compile(r"_per_second$"), "1/s"),
    (re.compile(r"(?:^|_)(?P<what>items|tokens|samples|requests|images|steps)_per_s$"), r"\g<what>/s"),
    (re.compile(r"_per_s$"), "1/s"),
    (re.compile(r"(?:_runtime|_seconds|_s|^step_time)$"), "s"),
    (re.compile(r"(?:^|_)flos$"), "FLOP"),
    (re.compile(r"(?:_bytes|_memory)$"), "By"),
    (re.compile(r"(?:^|_)tokens$"), "tokens"),
]


def metric_unit(name: str) -> str:
    """The unit of the training metric ``name`` ("1" when it has none, e.g. a loss)."""
    for pattern, unit in _RULES:
        m = pattern.search(name)
        if m:
            return m.expand(unit)
    return DIMENSIONLESS
