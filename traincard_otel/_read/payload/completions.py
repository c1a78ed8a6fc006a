"""The completions table of an RL run: sampled prompts and completions with each reward
function's score, the latest first.

The store keeps a bounded table already (:mod:`traincard_otel._data.completions`); the card shows
at most ``CARD_ROWS`` of it (``LIVE_ROWS`` of the latest step in a live update), each text cut at
``CARD_CHARS`` (``LIVE_CHARS``), saying how much was cut. The page folds long texts and searches
the rows it holds.
"""

from __future__ import annotations

from typing import Final

from ..._data.completions import cut
from ..._data.rundata import RunData
from .contract import CompletionRow, CompletionsSection
from .series import Mode

CARD_ROWS: Final = 300
CARD_CHARS: Final = 1500
LIVE_ROWS: Final = 16
LIVE_CHARS: Final = 300


def completions_section(data: RunData, mode: Mode) -> CompletionsSection:
    """The table's rows, newest step first, and how many rows the run scored in all."""
    table = data.completions
    names = table.reward_names()
    kept = table.rows()
    if mode.live:
        latest = kept[-1].step if kept else None
        kept = [r for r in kept if r.step == latest][-LIVE_ROWS:]
    shown = kept[-(LIVE_ROWS if mode.live else CARD_ROWS) :]
    chars = LIVE_CHARS if mode.live else CARD_CHARS
    rows: list[CompletionRow] = [
        {
            "step": r.step,
            "prompt": cut(r.prompt, chars),
            "completion": cut(r.completion, chars),
            "rewards": [r.rewards.get(n) for n in names],
            "advantage": r.advantage,
        }
        for r in reversed(shown)
    ]
    return {"rewards": names, "rows": rows, "kept": len(table), "seen": table.seen}
