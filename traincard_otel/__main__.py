"""``python -m traincard_otel``: the ``traincard`` command."""

from __future__ import annotations

from ._cli import main

raise SystemExit(main())
