"""Metric names from docs/schema.md, and their Prometheus forms (as the collector writes them)."""

from __future__ import annotations

import re

from tests.support.helpers import REPO

_ROW = re.compile(
    r"^\|\s*`([a-z][a-z0-9_.]+)`\s*\|\s*(gauge|counter|updowncounter|histogram)\s*\|\s*`([^`]*)`", re.M
)
_UNIT_SUFFIX = {"By": "bytes", "s": "seconds", "Cel": "celsius", "W": "watts", "J": "joules"}


def schema_rows() -> list[tuple[str, str, str]]:
    return _ROW.findall((REPO / "docs" / "schema.md").read_text())


def otel_metric_names() -> set[str]:
    return {name for name, _kind, _unit in schema_rows()}


def prometheus_name(name: str, kind: str, unit: str) -> str:
    base = name.replace(".", "_")
    main, _, per = unit.partition("/")
    main = re.sub(r"\{[^}]*\}", "", main)
    if main in _UNIT_SUFFIX:
        base += "_" + _UNIT_SUFFIX[main]
    elif main == "1" and kind == "gauge":
        base += "_ratio"
    if per == "s":
        base += "_per_second"
    if kind == "counter":
        base += "_total"
    return base


def prometheus_names() -> set[str]:
    out: set[str] = set()
    for name, kind, unit in schema_rows():
        base = prometheus_name(name, kind, unit)
        out |= {base + s for s in ("_bucket", "_sum", "_count")} if kind == "histogram" else {base}
    return out
