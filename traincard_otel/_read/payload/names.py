"""The names the page needs (``payload["names"]``): section keys, banner kinds, log levels, verdict
kinds and metric names it treats specially. ``card.js`` keeps no copies of its own."""

from __future__ import annotations

from ..._schema import REPORTED_FRACTIONS, SYSTEM_METRICS, SystemMetric
from .contract import NamesSection
from .logs import LEVELS
from .rl import GROUPS as RL_GROUPS
from .system import RATIO_METRICS

# Most severe first: (kind, title, icon, announced as an alert).
BANNERS: list[tuple[str, str, str, bool]] = [
    ("failed", "Failed", "\u2716", True),
    ("terminated", "Terminated", "\u25a0", True),
    ("stopped_early", "Stopped early", "\u23f9", True),
    ("stalled", "Stalled", "\u23f8", True),
    ("degraded", "Degraded", "\u26a0", False),
    ("store", "Store errors", "\u26a0", False),
    ("dropped", "Data dropped", "\u26a0", False),
    ("resumed", "Resumed", "\u21bb", False),
    ("guards", "Guard rails", "\u2691", False),
    ("info", "Note", "i", False),
]
VERDICTS = {
    "cuda_oom": "GPU out of memory",
    "host_oom": "Host out of memory",
    "nccl_timeout": "Collective (NCCL) timeout",
}
# Payload keys a live update replaces whole (charts and markers merge; see docs/card-payload.md).
REPLACED_SECTIONS = [
    "v",
    "final",
    "live",
    "generated_at",
    "run",
    "banners",
    "checkpoints",
    "logs",
    "log_info",
    "failure",
    "system",
    "summary",
    "health",
    "empty",
    "gang",
    "anatomy",
    "profiles",
    "completions",
    "agents",
    "sweep",
    "insights",
    "stats",
]
# Readings that are fractions of one (shown as percentages) besides the charted utilizations.
FRACTION_METRICS = [
    *RATIO_METRICS,
    *(m.name for m in (SystemMetric.MEMORY_UTILIZATION, SystemMetric.GPU_MEMORY_UTILIZATION)),
    *REPORTED_FRACTIONS,
]
# Readings in bytes (or bytes per second): every system instrument measured in bytes.
BYTE_METRICS = [m.name for m in SYSTEM_METRICS if m.unit == "By"]


def wire_names() -> NamesSection:
    """The ``names`` object of every payload."""
    return {
        "sections": REPLACED_SECTIONS,
        "banners": [{"kind": k, "title": t, "icon": i, "alert": a} for k, t, i, a in BANNERS],
        "levels": dict(LEVELS),
        "filter_levels": ["WARNING", "ERROR"],  # the log panel's "at least" choices
        "warning_level": LEVELS["WARNING"],
        "error_level": LEVELS["ERROR"],
        "verdicts": dict(VERDICTS),
        "ratio_metrics": FRACTION_METRICS,
        "byte_metrics": list(BYTE_METRICS),
        "series_colors": {"train": 0, "eval": 1},
        "groups": {"training": "training", "system": "system", **{g: g for g in RL_GROUPS}},
        "rl_groups": [{"group": g, "title": t} for g, t in RL_GROUPS.items()],
        "axes": {"step": "step", "item": "item", "time": "time"},
    }
