"""``python -m traincard_otel._schema > docs/schema.md``."""

from .doc import render_markdown

print(render_markdown(), end="")
