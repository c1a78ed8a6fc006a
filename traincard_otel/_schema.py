"""The wire schema: every record kind that crosses a thread or a file, and every emitted name.

This module is the single source of the names the package emits (event names, attribute keys,
metric instruments, span names, store record keys) and of the typed records that travel from the
training thread to the converter (:class:`MetricsReport`, :class:`StepEnd`, ...). The store's
JSON encoding (:class:`StoredMetricRow` ...), the OTel mapping (the converter and the store
exporters) and the card payload all take their names from here, and ``docs/schema.md`` is
generated from it (``python -m traincard_otel._schema > docs/schema.md``; a test keeps it so).

Training has no OpenTelemetry semantic conventions, so our own names use the ``traincard.``
prefix; host, process and GPU figures use the semconv names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final, Literal, NamedTuple, TypedDict

from ._types import JsonObject, JsonValue, Reported

# -- span names --------------------------------------------------------------------------------
RUN_SPAN: Final = "training.run"
PHASE_SPAN_PREFIX: Final = "training."  # + the phase name: training.train, training.eval ...


# -- attribute keys ----------------------------------------------------------------------------
class Attr:
    """Attribute keys on spans, log records, events and metric points."""

    STEP: Final = "traincard.step"
    ROWS: Final = "traincard.rows"
    PHASE: Final = "traincard.phase"
    ATTEMPT: Final = "traincard.attempt"
    STATUS: Final = "traincard.status"
    SIGNAL: Final = "traincard.signal"
    RANK: Final = "traincard.rank"
    LOCAL_RANK: Final = "traincard.local_rank"
    NODE_RANK: Final = "traincard.node_rank"
    WORLD_SIZE: Final = "traincard.world_size"
    REWIND_FROM: Final = "traincard.rewind.from"
    METRIC_NAME: Final = "traincard.metric.name"
    CHECKPOINT_PATH: Final = "traincard.checkpoint.path"
    CHECKPOINT_SIZE: Final = "traincard.checkpoint.size"
    CHECKPOINT_BEST: Final = "traincard.checkpoint.best"
    CHECKPOINT_METRIC: Final = "traincard.checkpoint.metric"
    CHECKPOINT_METRIC_VALUE: Final = "traincard.checkpoint.metric_value"
    FAILURE_VERDICT: Final = "traincard.failure.verdict"
    DROP_REASON: Final = "traincard.drop.reason"
    LOST_RANK: Final = "traincard.lost_rank"
    HEARTBEAT_AGE_S: Final = "traincard.heartbeat_age_s"
    STALL_THRESHOLD_S: Final = "traincard.stall.threshold_s"
    STALL_IDLE_S: Final = "traincard.stall.idle_s"
    STALL_DURATION_S: Final = "traincard.stall.duration_s"
    RESUME_SOURCE: Final = "traincard.resume.source"
    ANOMALY_KIND: Final = "traincard.anomaly.kind"
    ANOMALY_VALUE: Final = "traincard.anomaly.value"
    ANOMALY_EXPECTED: Final = "traincard.anomaly.expected"
    GOODPUT_CATEGORY: Final = "traincard.goodput.category"
    TORCH_MEMORY_KIND: Final = "traincard.torch.memory.kind"
    LOG_STREAM: Final = "log.iostream"
    ROLE: Final = "traincard.role"  # rank, or launcher (a node's step process that starts ranks)
    NODE_INDEX: Final = "node.index"
    PARALLEL_NODE_INDEX: Final = "metaflow.parallel.node_index"
    PARALLEL_NUM_NODES: Final = "metaflow.parallel.num_nodes"
    PARALLEL_CONTROL_TASK_ID: Final = "metaflow.parallel.control_task_id"
    MF_FLOW_NAME: Final = "metaflow.flow_name"
    MF_RUN_ID: Final = "metaflow.run_id"
    MF_STEP_NAME: Final = "metaflow.step_name"
    MF_TASK_ID: Final = "metaflow.task_id"
    MF_RETRY_COUNT: Final = "metaflow.retry_count"
    MF_PATHSPEC: Final = "metaflow.pathspec"
    MF_ORIGIN_RUN_ID: Final = "metaflow.origin_run_id"
    GANG_NODE_INDEX: Final = "traincard.node_index"
    GANG_HEARTBEAT_AT: Final = "traincard.heartbeat_at"
    GANG_FAILURE_HOW: Final = "traincard.failure.how"
    GANG_CONSEQUENCES: Final = "traincard.consequences"
    GANG_FIRST: Final = "traincard.failure.first"  # the gang's first failure (else a consequence)
    HOST_NAME: Final = "host.name"
    ERROR_TYPE: Final = "error.type"
    EXCEPTION_TYPE: Final = "exception.type"
    EXCEPTION_MESSAGE: Final = "exception.message"
    EXCEPTION_STACKTRACE: Final = "exception.stacktrace"


# -- log events (``event_name``) ---------------------------------------------------------------
class Event:
    """Names of the log events (OTel log records with an ``event_name``)."""

    METRICS: Final = "traincard.metrics"
    STEP_TIMING: Final = "traincard.step.timing"
    SYSTEM: Final = "traincard.system"
    HYPERPARAMS: Final = "traincard.hyperparams"
    STATUS: Final = "traincard.status"
    CHECKPOINT_SAVED: Final = "traincard.checkpoint.saved"
    RUN_STARTED: Final = "traincard.run.started"
    RUN_FINISHED: Final = "traincard.run.finished"
    RUN_FAILED: Final = "traincard.run.failed"
    RUN_TERMINATED: Final = "traincard.run.terminated"
    RUN_RESUMED: Final = "traincard.run.resumed"
    RUN_REWIND: Final = "traincard.run.rewind"
    STALL_STARTED: Final = "traincard.stall.started"
    STALL_CLEARED: Final = "traincard.stall.cleared"
    RANK_LOST: Final = "traincard.rank.lost"
    RANK_RECOVERED: Final = "traincard.rank.recovered"
    GANG_FIRST_FAILURE: Final = "traincard.gang.first_failure"
    GANG_RANK_HUNG: Final = "traincard.gang.rank_hung"
    ANOMALY: Final = "traincard.anomaly"

    @staticmethod
    def run_ended(status: str) -> str:
        """The lifecycle event for a run that ended with ``status`` (finished, terminated ...)."""
        return f"traincard.run.{status}"


# -- metric instruments ------------------------------------------------------------------------
InstrumentKind = Literal["gauge", "counter", "updowncounter", "histogram"]


@dataclasses.dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric instrument: its name, kind, unit, attribute keys and meaning."""

    name: str
    kind: InstrumentKind
    unit: str
    attributes: str
    meaning: str


class Metric:
    """Every metric instrument the package creates (``docs/schema.md`` lists them)."""

    METRIC: Final = MetricSpec(
        "traincard.metric",
        "gauge",
        "1",
        "`traincard.metric.name`",
        "last value of each reported training scalar "
        "(loss, eval_loss, learning_rate, grad_norm, user metrics)",
    )
    STEP: Final = MetricSpec("traincard.step", "gauge", "{step}", "", "current global step")
    EPOCH: Final = MetricSpec("traincard.epoch", "gauge", "{epoch}", "", "current (fractional) epoch")
    STEPS: Final = MetricSpec("traincard.steps", "counter", "{step}", "", "steps completed in this attempt")
    STEP_DURATION: Final = MetricSpec(
        "traincard.step.duration", "histogram", "s", "", "wall time per optimizer step (buckets 5 ms … 60 s)"
    )
    THROUGHPUT_TOKENS: Final = MetricSpec(
        "traincard.throughput.tokens", "gauge", "{token}/s", "", "tokens per second"
    )
    THROUGHPUT_SAMPLES: Final = MetricSpec(
        "traincard.throughput.samples", "gauge", "{sample}/s", "", "samples per second"
    )
    HEARTBEAT: Final = MetricSpec(
        "traincard.heartbeat", "gauge", "s", "", "unix time of this rank's last heartbeat"
    )
    CHECKPOINTS: Final = MetricSpec(
        "traincard.checkpoints", "counter", "{checkpoint}", "`traincard.checkpoint.best`", "checkpoints saved"
    )
    CHECKPOINT_SIZE: Final = MetricSpec(
        "traincard.checkpoint.size", "gauge", "By", "", "size on disk of the last checkpoint"
    )
    RESTARTS: Final = MetricSpec(
        "traincard.restarts", "gauge", "{restart}", "", "attempts before this one (Metaflow `@retry`)"
    )
    FAILURES: Final = MetricSpec(
        "traincard.failures",
        "counter",
        "{failure}",
        "`error.type`, `traincard.failure.verdict`, `traincard.phase`",
        "training failures recorded",
    )
    STALLED: Final = MetricSpec("traincard.stalled", "gauge", "1", "", "1 while a stall is declared, else 0")
    RANKS_LOST: Final = MetricSpec(
        "traincard.ranks.lost", "gauge", "{rank}", "", "ranks whose heartbeat is older than the timeout"
    )
    DROPPED: Final = MetricSpec(
        "traincard.dropped",
        "counter",
        "{record}",
        "`traincard.drop.reason`",
        "telemetry records dropped (full buffer, dead storage)",
    )
    REJECTED: Final = MetricSpec(
        "traincard.rejected",
        "counter",
        "{value}",
        "`traincard.drop.reason`",
        "reported values rejected (not a number, bad name or tags), by reason",
    )
    ANOMALIES: Final = MetricSpec(
        "traincard.anomalies",
        "counter",
        "{anomaly}",
        "`traincard.anomaly.kind` (loss_spike, nonfinite, grad_explosion, throughput_drop, eval_regression)",
        "anomalies flagged in the reported rows (each also a `traincard.anomaly` event)",
    )
    GOODPUT_TIME: Final = MetricSpec(
        "traincard.goodput.time",
        "gauge",
        "s",
        "`traincard.goodput.category` (productive, data_wait, startup, eval, checkpoint, stall, restart, "
        "shutdown, other)",
        "the run's wall time so far by category, as the card computes it from the store "
        "(published by the process that draws the live card; one per gang, from its control task)",
    )
    GOODPUT_RATIO: Final = MetricSpec(
        "traincard.goodput.share", "gauge", "1", "", "productive share of the run's wall time so far"
    )
    MODEL_FLOPS: Final = MetricSpec(
        "traincard.model.flops",
        "gauge",
        "{FLOP}/s",
        "`traincard.rank`",
        "achieved model FLOP/s of each rank: (6 x trainable + 4 x frozen parameters + the attention "
        "term) x its recent tokens/s",
    )
    MFU: Final = MetricSpec(
        "traincard.mfu",
        "gauge",
        "1",
        "`traincard.rank`",
        "model FLOPs utilisation of each rank's accelerator (only where its peak is known)",
    )
    GANG_RANK_FAILURES: Final = MetricSpec(
        "traincard.gang.rank_failures",
        "counter",
        "{rank}",
        f"`{Attr.RANK}`, `{Attr.GANG_NODE_INDEX}`, `{Attr.HOST_NAME}`, `{Attr.GANG_FIRST}` (true for the "
        f"first failure, false for a rank that ended after it), `{Attr.SIGNAL}` (when a signal ended it)",
        "ranks of a `@parallel` gang that ended in failure, each counted once, the first failure "
        "marked (published by the control node's live card refresher: one per gang)",
    )
    GANG_RANKS_HUNG: Final = MetricSpec(
        "traincard.gang.ranks_hung",
        "gauge",
        "{rank}",
        f"`{Attr.RANK}`, `{Attr.GANG_NODE_INDEX}`, `{Attr.HOST_NAME}`",
        "1 for each rank of a gang that is hung now (heartbeat older than the rank timeout while "
        "nothing says it ended); published like `traincard.gang.rank_failures`",
    )
    STORE_WRITE_ERRORS: Final = MetricSpec(
        "traincard.store.write_errors",
        "counter",
        "{error}",
        "",
        "failed writes to the store (each retried; the card shows the last error)",
    )


TRAINING_METRICS: Final[tuple[MetricSpec, ...]] = tuple(
    v for v in vars(Metric).values() if isinstance(v, MetricSpec)
)

GPU_TORCH_MEMORY: Final = "traincard.gpu.torch.memory"

#: Host, process and GPU instruments (semantic conventions), created by ``telemetry.instruments``.
SYSTEM_METRICS: Final[tuple[MetricSpec, ...]] = (
    MetricSpec("system.cpu.utilization", "gauge", "1", "", "host CPU utilization (0-1)"),
    MetricSpec(
        "system.memory.usage",
        "updowncounter",
        "By",
        "`system.memory.state` (used, free, cached, buffers)",
        "host memory",
    ),
    MetricSpec("system.memory.utilization", "gauge", "1", "`system.memory.state`", "host memory fraction"),
    MetricSpec("system.memory.limit", "updowncounter", "By", "", "host (or cgroup) memory limit"),
    MetricSpec("system.disk.io", "counter", "By", "`disk.io.direction` (read, write)", "host disk bytes"),
    MetricSpec(
        "system.network.io",
        "counter",
        "By",
        "`network.io.direction` (receive, transmit)",
        "host network bytes",
    ),
    MetricSpec(
        "process.cpu.utilization",
        "gauge",
        "1",
        "",
        "this process and its children, fraction of one core x cores",
    ),
    MetricSpec(
        "process.memory.usage",
        "updowncounter",
        "By",
        "",
        "RSS of this process and its children (the process tree is re-read every 10 s)",
    ),
    MetricSpec(
        "hw.gpu.utilization",
        "gauge",
        "1",
        "`hw.id`, `hw.name`, `hw.vendor`, `hw.gpu.task`",
        "GPU busy fraction",
    ),
    MetricSpec("hw.gpu.memory.usage", "updowncounter", "By", "`hw.id`, `hw.name`, `hw.vendor`", "VRAM used"),
    MetricSpec("hw.gpu.memory.limit", "updowncounter", "By", "`hw.id`, `hw.name`, `hw.vendor`", "VRAM total"),
    MetricSpec(
        "hw.gpu.memory.utilization", "gauge", "1", "`hw.id`, `hw.name`, `hw.vendor`", "VRAM used / total"
    ),
    MetricSpec(
        "hw.temperature", "gauge", "Cel", "`hw.id`, `hw.name`, `hw.vendor`, `hw.type`", "GPU temperature"
    ),
    MetricSpec("hw.power", "gauge", "W", "`hw.id`, `hw.name`, `hw.vendor`, `hw.type`", "GPU power draw"),
    MetricSpec(
        "hw.energy",
        "counter",
        "J",
        "`hw.id`, `hw.name`, `hw.vendor`, `hw.type`",
        "GPU energy since driver load",
    ),
    MetricSpec("hw.errors", "counter", "{error}", "`hw.id`, `hw.type`, `error.type`", "ECC / XID errors"),
    MetricSpec(
        GPU_TORCH_MEMORY,
        "gauge",
        "By",
        "`hw.id`, `traincard.torch.memory.kind` (allocated, reserved, peak)",
        "this process's torch CUDA allocator, on the GPUs it allocated on",
    ),
)

ALL_METRICS: Final[tuple[MetricSpec, ...]] = TRAINING_METRICS + SYSTEM_METRICS

#: Per-step rows are stored as log events already; the store keeps no copy of this gauge.
NOT_STORED_METRICS: Final = frozenset({Metric.METRIC.name})


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


class StepEnd(NamedTuple):
    """An optimizer step done (``Reporter.step_end``)."""

    t: float
    step: Reported
    duration_s: Reported
    samples: Reported
    tokens: Reported
    data_wait_s: Reported


class LogLine(NamedTuple):
    """A text log line (``Reporter.log``, the logging bridge, console capture)."""

    t: float
    level: str
    line: str
    traceback: str | None
    attributes: Mapping[str, str] | None


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


class StatusSnapshot(TypedDict, total=False):
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


# -- store records (one JSON object per line of a segment; ``k`` says which) --------------------
class StoreKind:
    """The ``k`` codes of the store's records (``docs/architecture.md``, store layout)."""

    METRIC_ROW: Final = "m"
    METRIC_RUN: Final = "m*"  # a packed run of metric rows (store/segment.py)
    STEP_END: Final = "st"
    STEP_RUN: Final = "st*"
    LOG: Final = "l"
    EVENT: Final = "e"
    SPAN: Final = "s"
    METRIC_POINT: Final = "x"


class StoredMetricRow(TypedDict, total=False):
    k: str
    t: float
    s: int | None
    p: str | None
    v: dict[str, float]
    g: dict[str, str] | None


class StoredLog(TypedDict):
    k: str
    t: float
    lvl: str
    msg: str
    a: JsonObject


class StoredEvent(TypedDict, total=False):
    k: str
    t: float
    n: str
    a: JsonObject
    b: JsonValue


class StoredSpanEvent(TypedDict):
    n: str
    t: float
    a: JsonObject


class StoredSpan(TypedDict):
    k: str
    n: str
    t0: float
    t1: float
    st: str
    a: JsonObject
    ev: list[StoredSpanEvent]


class StoredMetricPoint(TypedDict, total=False):
    k: str
    t: float
    n: str
    u: str
    a: JsonObject
    v: float
    c: int


# -- the documentation page ------------------------------------------------------------------
_EVENTS_DOC: Final[tuple[tuple[str, str], ...]] = (
    (
        Event.METRICS,
        "per-step metric rows, batched column by column: one event per drain (at each store flush, "
        'or every second without a store; ≤ 2000 rows), body `{"runs": [{"phase", "names": [name], '
        '"steps": [step], "times": [unix s], "values": [value], "tags"?}]}`, one run per stretch '
        "of rows with the same phase, names and tags; `values` is row-major, `len(steps) x len(names)`; "
        f"attributes `{Attr.STEP}` (last row), `{Attr.ROWS}`",
    ),
    (
        Event.STEP_TIMING,
        'step ends, batched the same way: body `{"steps", "times", "durations" (s; NaN where not '
        'measured), "waits" (data-wait s; NaN where not measured), "samples", "tokens" (0 where not '
        "reported)}`, one list each, one entry per step; attributes as above",
    ),
    (Event.SYSTEM, "the user's own system figures (`Reporter.system`), body {name: value}"),
    (Event.HYPERPARAMS, "hyperparameters the adapter found (body {name: text})"),
    (
        Event.STATUS,
        "this rank's status panel at every flush (status, phase, step, progress fields, heartbeat, "
        "last metrics, failure, last system sample, dropped/rejected counts); the store keeps the "
        "latest as `state.json`",
    ),
    (
        Event.CHECKPOINT_SAVED,
        f"`{Attr.CHECKPOINT_PATH}`, `{Attr.STEP}`, `{Attr.CHECKPOINT_SIZE}`, `{Attr.CHECKPOINT_BEST}`, "
        f"`{Attr.CHECKPOINT_METRIC}`, `{Attr.CHECKPOINT_METRIC_VALUE}` (also a span event of the open phase)",
    ),
    (Event.RUN_STARTED, f"`{Attr.ATTEMPT}`, `{Attr.RANK}`, `{Attr.HOST_NAME}`"),
    (Event.RUN_FINISHED, f"`{Attr.STATUS}`"),
    (Event.RUN_TERMINATED, f"`{Attr.STATUS}`, `{Attr.SIGNAL}`"),
    (
        Event.RUN_FAILED,
        f"`{Attr.EXCEPTION_TYPE}`, `{Attr.EXCEPTION_MESSAGE}`, `{Attr.EXCEPTION_STACKTRACE}`; body: the "
        "failure summary (type, message, traceback, phase, step, last metrics, last system, verdict)",
    ),
    (Event.RUN_RESUMED, f"a new attempt: `{Attr.ATTEMPT}`, `{Attr.STEP}`, `{Attr.RESUME_SOURCE}`"),
    (Event.RUN_REWIND, f"a step counter moving backwards: `{Attr.STEP}`, `{Attr.REWIND_FROM}`"),
    (Event.STALL_STARTED, f"watchdog: `{Attr.STALL_IDLE_S}`, `{Attr.STALL_THRESHOLD_S}`"),
    (Event.STALL_CLEARED, f"watchdog: `{Attr.STALL_DURATION_S}`"),
    (Event.RANK_LOST, f"a rank whose heartbeat stopped: `{Attr.LOST_RANK}`, `{Attr.HEARTBEAT_AGE_S}`"),
    (Event.RANK_RECOVERED, f"a lost rank heard from again: `{Attr.LOST_RANK}`"),
    (
        Event.GANG_FIRST_FAILURE,
        f"the first rank of a `@parallel` gang to fail (the control node says it once): `{Attr.RANK}`, "
        f"`{Attr.GANG_NODE_INDEX}`, `{Attr.HOST_NAME}`, `{Attr.GANG_FAILURE_HOW}`, `{Attr.STEP}`, "
        f"`{Attr.GANG_HEARTBEAT_AT}`, `{Attr.GANG_CONSEQUENCES}`",
    ),
    (Event.GANG_RANK_HUNG, "a rank whose heartbeat stopped while nothing says it ended; same attributes"),
    (
        Event.ANOMALY,
        "a loss spike, a NaN/inf loss or gradient norm, an exploding gradient norm, a throughput drop or "
        "an eval regression (rules: `traincard_otel/_insights/anomalies.py`, set by `TRAINCARD_ANOMALIES`); "
        f"body: the one-line explanation; `{Attr.ANOMALY_KIND}`, `{Attr.METRIC_NAME}`, `{Attr.STEP}`, "
        f"`{Attr.ANOMALY_VALUE}`, `{Attr.ANOMALY_EXPECTED}` (the median or best value it was judged "
        "against, when there is one)",
    ),
)

_RESOURCE_DOC: Final = (
    f"`service.name` (flow name unless `OTEL_SERVICE_NAME`), `{Attr.MF_FLOW_NAME}`, `{Attr.MF_RUN_ID}`, "
    f"`{Attr.MF_STEP_NAME}`, `{Attr.MF_TASK_ID}`, `{Attr.MF_RETRY_COUNT}`, `{Attr.MF_ORIGIN_RUN_ID}`, "
    f"`{Attr.MF_PATHSPEC}`, `{Attr.RANK}`, `{Attr.LOCAL_RANK}`, `{Attr.WORLD_SIZE}`, `{Attr.NODE_RANK}`, "
    f"`{Attr.ROLE}` (rank or launcher), `{Attr.NODE_INDEX}`, `{Attr.PARALLEL_NODE_INDEX}`, "
    f"`{Attr.PARALLEL_NUM_NODES}`, `{Attr.PARALLEL_CONTROL_TASK_ID}` (in a `@parallel` gang), "
    "`host.name`, `process.pid`, plus everything in `OTEL_RESOURCE_ATTRIBUTES`."
)


def render_markdown() -> str:
    """``docs/schema.md``: every name above as a page."""
    out = [
        "# Emitted names",
        "",
        "Every metric, span, event and resource attribute the package emits. Generated from",
        "`traincard_otel/_schema.py` (`python -m traincard_otel._schema > docs/schema.md`);",
        "`tests/unit/test_schema.py` fails if this page and the module differ, or if the code emits a",
        "name the module does not define. The dashboards and alert rules in `collector-config/` are",
        "checked against this page.",
        "",
        "## Metrics",
        "",
        "The `traincard.*` metrics exist for metric backends: they are created only when a metric",
        "exporter (`OTEL_METRICS_EXPORTER`: OTLP, Prometheus, console) is configured. The store, and so",
        "the card, has the same facts in full already. Without one, the store's metric points are the",
        "host, process and GPU figures; GPU instruments exist only where the sampler reads a GPU.",
        "",
        "| name | instrument | unit | attributes | meaning |",
        "|---|---|---|---|---|",
    ]
    out += [f"| `{m.name}` | {m.kind} | `{m.unit}` | {m.attributes} | {m.meaning} |" for m in ALL_METRICS]
    out += [
        "",
        "## Spans",
        "",
        "| name | when | attributes |",
        "|---|---|---|",
        f"| `{RUN_SPAN}` | one per task attempt and rank, from `configure()` to shutdown | `{Attr.STATUS}`, "
        f"`{Attr.ATTEMPT}` |",
        f"| `{PHASE_SPAN_PREFIX}<phase>` (`training.train`, `training.eval`, `training.save`, any user phase)"
        f" | child of `{RUN_SPAN}` | `{Attr.PHASE}`, `{Attr.STEP}` |",
        "",
        "## Log events (`event_name`)",
        "",
        "| event | body / attributes |",
        "|---|---|",
    ]
    out += [f"| `{name}` | {doc} |" for name, doc in _EVENTS_DOC]
    out += [
        f"| (none) | text log lines: severity, body = the line; `{Attr.EXCEPTION_STACKTRACE}` for a "
        f"traceback, `{Attr.LOG_STREAM}` (stdout, stderr) for captured console output |",
        "",
        "## Resource attributes",
        "",
        _RESOURCE_DOC,
        "",
    ]
    return "\n".join(out)


def event_names() -> frozenset[str]:
    """Every event name defined above."""
    return frozenset(v for k, v in vars(Event).items() if k.isupper() and isinstance(v, str))


if __name__ == "__main__":
    print(render_markdown(), end="")
