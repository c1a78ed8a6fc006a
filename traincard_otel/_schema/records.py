"""The typed records: reports from the training thread to the converter, the status snapshot, and
the store's record codes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple, TypedDict

from .._types import JsonObject, Reported

# -- records from the training thread to the converter -----------------------------------------
# NamedTuples: a report is built on the training thread, where each µs counts (a NamedTuple costs
# about 0.2 µs more than a bare tuple, a frozen dataclass three times that), and the converter
# translates a stretch of them column by column with ``zip(*reports)``.


class MetricsReport(NamedTuple):
    """Scalars reported together at one step (``Reporter.metric`` / ``metrics``)."""

    t: float
    step: Reported  # an int; numpy/tensor scalars are converted off the training thread
    phase: str | None
    values: dict[Reported, Reported]  # name -> number-like; checked and converted by the converter
    tags: Reported  # Mapping[str, str] | None, checked by the converter


#: The parts of a step's anatomy that are measured, in the order a step end carries them
#: (``StepEnd.parts``, the ``parts`` column of ``traincard.step.timing``, the store's ``a``).
STEP_PARTS: Final = ("data", "forward", "backward", "optimizer", "communication")
#: The parts a step's wall time is split into: the measured ones and ``other``, the rest.
ANATOMY_PARTS: Final = (*STEP_PARTS, "other")


class StepEnd(NamedTuple):
    """An optimizer step done (``Reporter.step_end``)."""

    t: float
    step: Reported
    duration_s: Reported
    samples: Reported
    tokens: Reported
    data_wait_s: Reported
    # seconds per STEP_PARTS (NaN: not measured), or an object whose ``seconds()`` returns them
    # when read off the training thread (CUDA events); None without an anatomy
    parts: Reported = None


class LogLine(NamedTuple):
    """A text log line (``Reporter.log``, the logging bridge, console capture)."""

    t: float
    level: str
    line: str
    traceback: str | None
    attributes: Mapping[str, str] | None


class LogLines(NamedTuple):
    """The lines console capture read in one go, as columns: one report for the batch, not one
    a line (a line printed every step would otherwise be a report, a store record and an SDK
    record of its own)."""

    times: list[float]
    levels: list[str]
    lines: list[str]
    tracebacks: dict[int, str]  # by line index: the block a line ends (an ERROR line)
    attributes: Mapping[str, str] | None  # every line's


class PhaseStart(NamedTuple):
    t: float
    name: str
    token: int
    step: int | None


class PhaseEnd(NamedTuple):
    t: float
    token: int
    error: tuple[str, str] | None  # (exception type, message)


class CheckpointSaved(NamedTuple):
    t: float
    path: str
    step: int | None
    metadata: dict[str, Reported]


class SystemReport(NamedTuple):
    """The user's own system figures (``Reporter.system``)."""

    t: float
    stats: dict[Reported, Reported]


class Hyperparameters(NamedTuple):
    t: float
    values: dict[str, str]


class LifecycleEvent(NamedTuple):
    """Any other event: run lifecycle, watchdog, user events (``Reporter.event``)."""

    t: float
    name: str
    attributes: dict[str, Reported]
    body: Reported


class Failure(NamedTuple):
    """An exception that ends training (``Reporter.failure``)."""

    t: float
    exc: BaseException
    traceback: str


Report = (
    MetricsReport
    | StepEnd
    | LogLine
    | LogLines
    | PhaseStart
    | PhaseEnd
    | CheckpointSaved
    | SystemReport
    | Hyperparameters
    | LifecycleEvent
    | Failure
)

#: What a metric source returns per report: (values, step, phase).
SourcedReport = tuple[Mapping[str, Reported], Reported, str | None]


# -- the status snapshot (state.json), emitted as a ``traincard.status`` event ------------------
class Heartbeat(NamedTuple):
    """How far a rank has got and when it last said it was alive."""

    step: int | None
    at: float


#: The progress field (``StatusSection.progress``) naming the kind of training loop when an adapter
#: knows it: ``"rl"`` for an online RL trainer, which the card lays out by rewards and policy.
LOOP_FIELD: Final = "loop"
RL_LOOP: Final = "rl"
#: The progress field holding the ``genai_prices`` setting, for the agent loop's cost per episode.
GENAI_PRICES_FIELD: Final = "genai_prices"


class StatusSection(TypedDict, total=False):
    """One rank's status panel: the body of ``traincard.status`` and the store's ``state.json``."""

    status: str
    terminated_by: str | None
    started_at: float
    updated_at: float
    heartbeat_at: float
    step: int | None
    progress: dict[str, Reported]
    host: str
    pid: int
    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    pathspec: str | None
    origin_run_id: str | None
    hot_path_overflow: int
    hourly_cost: float | None
    rank_timeout_s: float
    flush_interval_s: float
    # other ranks of this node seen to end: rank, local_rank, pid, time, exitcode, signal
    ended_siblings: list[JsonObject]
    notes: list[str]
    last_system: dict[str, float]
    last_metrics: dict[str, float]
    rejected: dict[str, int]
    failure: JsonObject | None
    checkpoints: int
    phase: str | None
    stalled: bool
    stalled_since: float | None
    stalls: int
    input_bound_share: float | None
    lost_ranks: list[JsonObject]
    previous_attempt: JsonObject | None
    # the guard rails: stop_on, notify_on, notification counts, what tripped, the actions taken
    guards: JsonObject | None
    # the watchdog's latest stack dump while stalled or asked for (``_write/telemetry/stacks.py``)
    stacks: JsonObject | None
    # the recent steps' anatomy: steps, step_s, own_s, seconds per part (``_write/convert/rows.py``)
    anatomy: JsonObject | None
    # the latest profile capture's progress: id, status, trigger, steps (``_write/telemetry/profiler.py``)
    profile: JsonObject | None


# -- store records (one JSON object per line of a segment; ``k`` says which) --------------------
class StoreKind:
    """The ``k`` codes of the store's records (``docs/architecture.md``, store layout)."""

    METRIC_ROW: Final = "m"
    METRIC_RUN: Final = "m*"  # a packed run of metric rows (store/segment.py)
    STEP_END: Final = "st"
    STEP_RUN: Final = "st*"
    LOG: Final = "l"
    LOG_RUN: Final = "l*"  # the log lines console capture read in one go (store/segment.py)
    EVENT: Final = "e"
    SPAN: Final = "s"
    METRIC_POINT: Final = "x"
