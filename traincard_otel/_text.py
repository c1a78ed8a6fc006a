"""Text every exporter, file and page can encode: both sides of the store make text safe here.

Badly decoded bytes leave surrogate code points in a ``str`` (``"\\ud800"``), which UTF-8 writers
and protobuf refuse. They are replaced before any text reaches an exporter (the write side) and
again before a page embeds it (the read side, for stores written before).
"""

from __future__ import annotations

from collections.abc import Mapping

from ._types import JsonValue


def encodable(text: str) -> str:
    """``text`` with surrogate code points replaced: paired ones joined, lone ones as U+FFFD.
    ASCII, the common case, is checked at C speed and returned as is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def scrub(value: object) -> JsonValue:
    """A copy of a JSON-like ``value`` whose every string is :func:`encodable` (keys included)."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, Mapping):
        return {scrub(str(k)): scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value
