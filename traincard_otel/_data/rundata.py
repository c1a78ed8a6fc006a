"""What a run recorded, in memory: :class:`RunData` (one run, every attempt and rank merged) and
its :class:`Series` (one metric's points, each labelled with its attempt and rank).

Plain data at the foundation: the store's reader fills it (:mod:`traincard_otel._read.load.reader`),
the analysis (:mod:`traincard_otel._analysis`), the card and the CLI read it. No I/O, no analysis.
"""

from __future__ import annotations

import dataclasses
from collections.abc import MutableSequence
from typing import TYPE_CHECKING

from .._types import Foreign, JsonObject, JsonValue
from .anatomy import StepParts
from .completions import Completions

if TYPE_CHECKING:
    from .frames import Kind

Record = JsonObject

DATA_WAIT_TAIL = 1000
MAX_GENAI_SPANS = 100_000  # more are counted in stats["genai_spans_over"], not kept


@dataclasses.dataclass
class Series:
    """One metric's points in report order (rows from every attempt and rank, each labelled).

    A series read from a store holds compact typed columns
    (:class:`~traincard_otel._read.load.columns.Column`, an ``array.array`` of 8 bytes a value) that
    read like lists: indexing, ``len``, iteration, ``values[-1]``, equality with a list; a slice
    is an ``array.array``. A column whose values do not fit its type (a step that is not an
    integer) is a list. System series and series built by hand hold lists.
    """

    name: str
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    steps: MutableSequence[JsonValue] = dataclasses.field(default_factory=list)
    values: MutableSequence[float] = dataclasses.field(default_factory=list)
    times: MutableSequence[float] = dataclasses.field(default_factory=list)
    attempts: MutableSequence[int] = dataclasses.field(default_factory=list)
    ranks: MutableSequence[int] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.values)


@dataclasses.dataclass
class RunData:
    """Everything one task recorded. ``metrics`` maps a metric name (with ``{tag=value}`` when
    tagged) to its :class:`Series`; ``system`` maps a system metric key to a time series."""

    source: str
    metrics: dict[str, Series] = dataclasses.field(default_factory=dict)
    step_times: dict[int, Series] = dataclasses.field(default_factory=dict)
    throughput: dict[str, Series] = dataclasses.field(default_factory=dict)
    system: dict[str, Series] = dataclasses.field(default_factory=dict)
    # per rank, the data-wait time of its last DATA_WAIT_TAIL timed steps (not the whole run: a
    # second full series per rank would grow a 64-rank gang's memory by half for one figure)
    data_wait: dict[int, Series] = dataclasses.field(default_factory=dict)
    data_wait_total: dict[int, float] = dataclasses.field(default_factory=dict)  # per rank, whole run
    # per rank, its steps' anatomy (data, forward, backward, optimizer, communication), bounded
    anatomy: dict[int, StepParts] = dataclasses.field(default_factory=dict)
    phases: list[Record] = dataclasses.field(default_factory=list)
    checkpoints: list[Record] = dataclasses.field(default_factory=list)
    logs: list[Record] = dataclasses.field(default_factory=list)
    events: list[Record] = dataclasses.field(default_factory=list)
    states: list[Record] = dataclasses.field(default_factory=list)
    stats: JsonObject = dataclasses.field(default_factory=dict)
    gang: JsonObject = dataclasses.field(default_factory=dict)  # see traincard_otel._read.load.gang
    # an RL run's sampled prompts and completions, bounded (see traincard_otel._data.completions)
    completions: Completions = dataclasses.field(default_factory=Completions)
    # GenAI-convention spans captured with the genai setting: attributes, name, t0, t1, trace,
    # span, parent, error (see traincard_otel._write.pipeline.genai)
    genai_spans: list[Record] = dataclasses.field(default_factory=list)
    # profile captures, oldest first: id, trigger, detail, asked_at, steps, and per rank its summary
    # (top operators, breakdown, the profiler's cost, trace and trace_location); see
    # traincard_otel._read.load.profiles
    profiles: list[Record] = dataclasses.field(default_factory=list)

    def to_rows(self, kind: Kind = "metrics") -> list[JsonObject]:
        """One dict per metric point, step time, log line, checkpoint, event, sampled completion or
        step part (``kind``; ``"anatomy"``: ``rank, step, part, seconds``)."""
        from .frames import rows

        return rows(self, kind)

    def to_arrow(self, kind: Kind = "metrics") -> Foreign:
        """The same as a ``pyarrow.Table`` (for Parquet, DuckDB, Polars)."""
        from .frames import to_arrow

        return to_arrow(self, kind)

    def to_pandas(self, kind: Kind = "metrics", *, wide: bool = False) -> Foreign:
        """The same as a ``pandas.DataFrame``; ``wide=True`` pivots metrics to a column each."""
        from .frames import to_pandas

        return to_pandas(self, kind, wide=wide)

    @property
    def attempts(self) -> list[int]:
        return sorted({int(s.get("attempt", 0)) for s in self.states})

    @property
    def status(self) -> Record:
        """Status of the latest attempt, from rank 0's state (other ranks fill gaps)."""
        if not self.states:
            return {}
        latest = max(self.attempts)
        states = sorted(
            (s for s in self.states if s.get("attempt") == latest), key=lambda s: s.get("rank", 0)
        )
        merged = dict(states[0])
        merged["restarts"] = latest
        merged["ranks"] = {s.get("rank", 0): s for s in states}
        for s in states:
            if s.get("failure") and not merged.get("failure"):
                merged["failure"] = s["failure"]
        if self.gang.get("failure"):  # a gang's first failure, not what a surviving rank raised
            merged["failure"] = self.gang["failure"]
        return merged

    @property
    def failure(self) -> Record | None:
        return self.status.get("failure")

    def series(self, name: str) -> Series:
        return self.metrics[name]
