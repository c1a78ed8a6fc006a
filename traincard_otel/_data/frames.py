"""A run's data as rows, an Arrow table or a pandas DataFrame (one call each, for notebooks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from .._optional import require
from .._types import Foreign, JsonObject, JsonValue
from .anatomy import StepParts
from .completions import Completions


class _Series(Protocol):
    @property
    def steps(self) -> Sequence[int | None]: ...
    @property
    def values(self) -> Sequence[float]: ...
    @property
    def times(self) -> Sequence[float]: ...
    @property
    def attempts(self) -> Sequence[int]: ...
    @property
    def ranks(self) -> Sequence[int]: ...
    def __len__(self) -> int: ...


class RunData(Protocol):
    """What these conversions read of :class:`~traincard_otel._data.rundata.RunData`."""

    @property
    def metrics(self) -> Mapping[str, _Series]: ...
    @property
    def step_times(self) -> Mapping[int, _Series]: ...
    @property
    def logs(self) -> Sequence[Mapping[str, JsonValue]]: ...
    @property
    def checkpoints(self) -> Sequence[Mapping[str, JsonValue]]: ...
    @property
    def events(self) -> Sequence[Mapping[str, JsonValue]]: ...
    @property
    def completions(self) -> Completions: ...
    @property
    def anatomy(self) -> Mapping[int, StepParts]: ...


Kind = Literal["metrics", "logs", "checkpoints", "step_times", "events", "completions", "anatomy"]
KINDS: tuple[Kind, ...] = ("metrics", "logs", "checkpoints", "step_times", "events", "completions", "anatomy")


def rows(data: RunData, kind: Kind = "metrics") -> list[JsonObject]:
    """One dict per point (metrics, step_times), log line, checkpoint, event, sampled completion
    (an RL run's: step, prompt, completion, one column per reward function, advantage) or step part
    (anatomy: rank, step, part, seconds; a long run's bounded sample of steps, every part measured
    and ``other``, the rest of the step)."""
    if kind == "metrics":
        return [
            {
                "metric": name,
                "step": s.steps[i],
                "value": s.values[i],
                "time": s.times[i],
                "attempt": s.attempts[i],
                "rank": s.ranks[i],
            }
            for name, s in sorted(data.metrics.items())
            for i in range(len(s))
        ]
    if kind == "step_times":
        return [
            {
                "rank": rank,
                "step": s.steps[i],
                "duration_s": s.values[i],
                "time": s.times[i],
                "attempt": s.attempts[i],
            }
            for rank, s in sorted(data.step_times.items())
            for i in range(len(s))
        ]
    if kind == "logs":
        return [{k: v for k, v in line.items() if k != "attributes"} for line in data.logs]
    if kind == "checkpoints":
        return [dict(c) for c in data.checkpoints]
    if kind == "events":
        return [
            {k: (v if not isinstance(v, (dict, list)) else repr(v)) for k, v in e.items()}
            for e in data.events
        ]
    if kind == "completions":
        names = data.completions.reward_names()
        return [
            {
                "step": c.step,
                "prompt": c.prompt,
                "completion": c.completion,
                **{name: c.rewards.get(name) for name in names},
                "advantage": c.advantage,
            }
            for c in data.completions.rows()
        ]
    if kind == "anatomy":
        return [
            {"rank": rank, "step": step, "part": part, "seconds": seconds}
            for rank, parts in sorted(data.anatomy.items())
            for step, row in parts.rows()
            for part, seconds in row.items()
            if seconds == seconds  # a part not measured has no row
        ]
    raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")


def to_arrow(data: RunData, kind: Kind = "metrics") -> Foreign:
    """A ``pyarrow.Table`` of :func:`rows` (``pip install 'traincard-otel[store]'``)."""
    pa = require("pyarrow", "store")
    return pa.Table.from_pylist(rows(data, kind))


def to_pandas(data: RunData, kind: Kind = "metrics", *, wide: bool = False) -> Foreign:
    """A ``pandas.DataFrame`` of :func:`rows`; ``wide=True`` (metrics): one row per step, one
    column per metric (the last value reported at a step wins)."""
    pd = require("pandas", "notebook")
    frame = pd.DataFrame(rows(data, kind))
    if wide:
        if kind != "metrics":
            raise ValueError("wide=True pivots metrics by step; use kind='metrics'")
        if frame.empty:
            return frame
        frame = frame.pivot_table(index="step", columns="metric", values="value", aggfunc="last")
        frame.columns.name = None
    return frame
