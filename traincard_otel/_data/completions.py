"""Sampled prompts and completions of an RL run, kept within a bounded size.

An online RL trainer (TRL's GRPO, RLOO ...) scores a batch of completions at every generation; the
adapter reports each logged batch as one ``traincard.completions`` event. A run of thousands of
steps would make that millions of texts, so :class:`Completions` keeps the rows of the latest
``recent_steps`` steps whole and a uniform sample (reservoir sampling, seeded, so two reads of the
same store keep the same rows) of the earlier ones, at most ``max_rows`` rows in all, each text
cut at ``max_chars`` characters with the number cut said in the text. ``seen`` counts every row
read, so the card says how many it shows of how many.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from .._types import JsonValue

MAX_ROWS: Final = 2000
RECENT_STEPS: Final = 4
MAX_CHARS: Final = 4000


class Completion(NamedTuple):
    """One sampled completion: its step, prompt and text, each reward function's score and the
    advantage the trainer gave it."""

    step: int | None
    prompt: str
    completion: str
    rewards: dict[str, float | None]
    advantage: float | None


def cut(text: str, max_chars: int = MAX_CHARS) -> str:
    """``text`` at most ``max_chars`` long, saying how much was cut."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\u2026 [{len(text) - max_chars} more characters]"


def as_text(value: JsonValue) -> str:
    """A prompt or completion as text: a conversation (a list of ``{role, content}`` messages, as
    chat-format trainers log them) becomes ``role: content`` lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        lines = []
        for message in value:
            if isinstance(message, dict):
                lines.append(f"{message.get('role', '')}: {as_text(message.get('content', ''))}")
            else:
                lines.append(as_text(message))
        return "\n".join(lines)
    return "" if value is None else str(value)


def _number(value: JsonValue) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rows_of(step: int | None, body: Mapping[str, JsonValue], max_chars: int = MAX_CHARS) -> list[Completion]:
    """The rows of one ``traincard.completions`` event's body (columns ``prompt``, ``completion``,
    ``advantage`` and ``rewards``: a reward function's name -> its column)."""
    prompts = body.get("prompt")
    texts = body.get("completion")
    if not isinstance(prompts, list) or not isinstance(texts, list):
        return []
    raw_rewards = body.get("rewards")
    rewards = raw_rewards if isinstance(raw_rewards, dict) else {}
    advantages = body.get("advantage")
    out = []
    for i, (prompt, text) in enumerate(zip(prompts, texts, strict=False)):
        scores: dict[str, float | None] = {}
        for name, column in rewards.items():
            scores[str(name)] = _number(column[i]) if isinstance(column, list) and i < len(column) else None
        advantage = _number(advantages[i]) if isinstance(advantages, list) and i < len(advantages) else None
        out.append(
            Completion(
                step, cut(as_text(prompt), max_chars), cut(as_text(text), max_chars), scores, advantage
            )
        )
    return out


class Completions:
    """The kept rows (see the module docstring); ``add`` them in report order."""

    def __init__(self, max_rows: int = MAX_ROWS, recent_steps: int = RECENT_STEPS) -> None:
        if max_rows < 1 or recent_steps < 1:
            raise ValueError(f"need max_rows >= 1 and recent_steps >= 1; got {max_rows}, {recent_steps}")
        self.max_rows, self.recent_steps = max_rows, recent_steps
        self.seen = 0
        self._recent: dict[int | None, list[Completion]] = {}  # step -> its rows, oldest step first
        self._sample: list[Completion] = []
        self._sampled = 0  # rows offered to the sample
        self._random = random.Random(0)

    def __len__(self) -> int:
        return len(self._sample) + sum(map(len, self._recent.values()))

    def add(self, rows: Sequence[Completion]) -> None:
        """Rows of one logged batch (one step)."""
        for row in rows:
            self.seen += 1
            recent = self._recent.get(row.step)
            if recent is None:
                recent = self._recent[row.step] = []
                while len(self._recent) > self.recent_steps:
                    oldest = next(iter(self._recent))
                    for old in self._recent.pop(oldest):
                        self._offer(old)
            recent.append(row)
        # Recent rows never exceed the bound: the oldest recent ones make way.
        excess = len(self) - self.max_rows
        while excess > 0 and self._sample:
            self._sample.pop(self._random.randrange(len(self._sample)))
            excess -= 1
        while excess > 0 and len(self._recent) > 1:
            oldest = next(iter(self._recent))
            del self._recent[oldest][0]
            if not self._recent[oldest]:
                del self._recent[oldest]
            excess -= 1
        if excess > 0:  # one step with more rows than the bound: its latest rows stay
            latest = next(iter(self._recent))
            del self._recent[latest][:excess]

    def _offer(self, row: Completion) -> None:
        """Reservoir sampling (algorithm R) into the room the recent rows leave."""
        self._sampled += 1
        room = self.max_rows - sum(map(len, self._recent.values()))
        if room <= 0:
            return
        if len(self._sample) < room:
            self._sample.append(row)
            return
        slot = self._random.randrange(self._sampled)
        if slot < len(self._sample):
            self._sample[slot] = row

    def rows(self) -> list[Completion]:
        """The kept rows, by step (a sampled earlier row before the recent ones)."""
        sample = sorted(self._sample, key=lambda r: -1 if r.step is None else r.step)
        return sample + [row for rows in self._recent.values() for row in rows]

    def reward_names(self) -> list[str]:
        """Every reward function's name, in first-seen order."""
        names: dict[str, None] = {}
        for row in self.rows():
            names.update(dict.fromkeys(row.rewards))
        return list(names)
