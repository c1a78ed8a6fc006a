"""The keys that name one series or one reading, built and parsed only here.

A series of a tagged metric is stored and shown as ``name{k=v,...}`` (tags sorted); a system
reading in the run status as ``name[hw.id]{k=v,...}`` (the device in brackets, its descriptive
attributes left out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Attributes that describe a device rather than tell readings apart: a reading key leaves them out.
DEVICE_ATTRIBUTES = frozenset({"hw.id", "hw.name", "hw.vendor", "hw.type", "hw.gpu.task"})

_READING_KEY = re.compile(r"^([^\[{]+)(?:\[([^\]]*)\])?(?:\{(.*)\})?$")


def tags_text(tags: Mapping[str, object] | None) -> str:
    """``"k=v,k2=v2"``, sorted by key: the inside of a key's braces, and a series' label."""
    return ",".join(f"{k}={v}" for k, v in sorted((tags or {}).items()))


def series_key(name: str, tags: Mapping[str, object] | None) -> str:
    """``"loss{split=val}"``; the bare name for an untagged series."""
    return name + "{" + tags_text(tags) + "}" if tags else name


def is_tagged(key: str) -> bool:
    """Whether a series key carries tags."""
    return "{" in key


def reading_key(name: str, attributes: Mapping[str, object]) -> str:
    """``"hw.errors[gpu0]{error.type=corrected}"``: how a reading is named in the run status."""
    key = name
    hw_id = attributes.get("hw.id")
    if hw_id is not None:
        key += f"[{hw_id}]"
    return series_key(key, {k: v for k, v in attributes.items() if k not in DEVICE_ATTRIBUTES})


def split_reading_key(key: str) -> tuple[str, str | None, dict[str, str]]:
    """The inverse of :func:`reading_key` (and of :func:`series_key`): ``(name, hw.id or None,
    other attributes)``."""
    m = _READING_KEY.match(key)
    if m is None:
        return key, None, {}
    attrs = dict(part.split("=", 1) for part in (m.group(3) or "").split(",") if "=" in part)
    return m.group(1), m.group(2), attrs
