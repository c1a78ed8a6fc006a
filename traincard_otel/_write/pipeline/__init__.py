"""One private OTel pipeline per process: set-up, schedule, status and a bounded exit."""

from __future__ import annotations

from .lifecycle import Pipeline
from .process_exit import add_terminate_hook
from .registry import active, shutdown, start

__all__ = ["Pipeline", "active", "add_terminate_hook", "shutdown", "start"]
