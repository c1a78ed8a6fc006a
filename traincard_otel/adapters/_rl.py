"""TRL's online RL trainers (GRPO, RLOO, PPO, online DPO ...): the run says it is one, and the
completions each logged step scored are reported from the trainer's own data.

The trainer keeps the latest generation's prompts, completions, each reward function's scores and
the advantages in ``trainer._logs`` (bounded deques), and prints them as a console table from
``log()``. ``log()`` is wrapped on the instance: after the trainer's own, on the training thread
and only at a logging step, the columns are copied (strings and floats, a few hundred at most)
and reported as one ``traincard.completions`` event. The console table is never parsed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from .._safety import internal_error
from .._schema import Attr, Event
from .._types import Foreign, Reported
from .._write.report.reporter import Reporter

#: Trainer classes that generate and score completions online, by name (any class of the MRO).
ONLINE_RL_TRAINERS = frozenset(
    {
        "GRPOTrainer",
        "AsyncGRPOTrainer",
        "GMPOTrainer",
        "RLOOTrainer",
        "PPOTrainer",
        "OnlineDPOTrainer",
        "XPOTrainer",
        "NashMDTrainer",
        "A2POTrainer",
    }
)


def is_online_rl(trainer: object) -> bool:
    """Whether ``trainer`` is one of TRL's online RL trainers (or a subclass of one)."""
    return any(cls.__name__ in ONLINE_RL_TRAINERS for cls in type(trainer).__mro__)


def _text(value: Foreign) -> Reported:
    """A prompt or completion as reported: a string, or a conversation's ``{role, content}``
    messages (content kept as text; images and other parts dropped)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return [
            {"role": str(m.get("role", "")), "content": _content(m.get("content", ""))}
            if isinstance(m, dict)
            else str(m)
            for m in value
        ]
    return str(value)


def _content(content: Foreign) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: their text
        return " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content)


def _floats(values: Iterable[Foreign]) -> list[Reported]:
    return [float(v) if isinstance(v, (int, float)) else None for v in values]


def completions_body(logs: Foreign) -> dict[str, Reported] | None:
    """The event body for a trainer's ``_logs`` (None when it holds no completions)."""
    if not isinstance(logs, dict) or not logs.get("completion"):
        return None
    rewards = logs.get("rewards") or {}
    return {
        "prompt": [_text(p) for p in list(logs.get("prompt") or ())],
        "completion": [_text(c) for c in list(logs["completion"])],
        "rewards": {str(name): _floats(list(col)) for name, col in list(rewards.items())},
        "advantage": _floats(list(logs.get("advantages") or ())),
    }


def tap_log(trainer: Foreign, reporter: Reporter) -> Callable[..., Foreign]:
    """``trainer.log`` that reports the latest completions after the trainer logged."""
    original = trainer.log
    reported: list[int] = []  # the step last reported: a logging step without a new generation

    @functools.wraps(original)
    def log(logs: dict[str, float], *args: object, **kwargs: object) -> Foreign:
        result = original(logs, *args, **kwargs)
        try:
            model = getattr(trainer, "model", None)
            step = int(trainer.state.global_step)
            if getattr(model, "training", True) and reported[-1:] != [step]:
                body = completions_body(getattr(trainer, "_logs", None))
                if body is not None:
                    reported[:] = [step]
                    reporter.event(Event.COMPLETIONS, {Attr.STEP: step}, body)
        except Exception as exc:  # logging must go on
            internal_error("hf.completions", exc)
        return result

    return log
