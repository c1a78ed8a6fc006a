"""Every metric instrument the package creates: name, kind, unit, attributes and meaning."""

from __future__ import annotations

import dataclasses
from typing import Final, Literal

from .anomaly_kinds import ANOMALY_KIND_NAMES
from .names import Attr

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
    STEP_PART_DURATION: Final = MetricSpec(
        "traincard.step.part.duration",
        "histogram",
        "s",
        f"`{Attr.STEP_PART}` (data, forward, backward, optimizer, communication, other)",
        "time per optimizer step in each part of its anatomy, from the framework's hooks (the parts "
        "of a step add up to its wall time; a part the adapter cannot measure is not recorded)",
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
        f"`traincard.anomaly.kind` ({', '.join(ANOMALY_KIND_NAMES)})",
        "anomalies flagged in the reported rows (each also a `traincard.anomaly` event)",
    )
    GOODPUT_TIME: Final = MetricSpec(
        "traincard.goodput.time",
        "gauge",
        "s",
        "`traincard.goodput.category` (productive, data_wait, startup, eval, checkpoint, stall, restart, "
        "shutdown, other)",
        "this attempt's wall time so far by category, from what rank 0's converter saw (the card's "
        "goodput, read from the store, spans every attempt of the run: restarts, the gaps between "
        "attempts and the steps a later attempt re-computes)",
    )
    GOODPUT_RATIO: Final = MetricSpec(
        "traincard.goodput.share",
        "gauge",
        "1",
        "",
        "productive share of this attempt's wall time so far (rank 0)",
    )
    MODEL_FLOPS: Final = MetricSpec(
        "traincard.model.flops",
        "gauge",
        "{FLOP}/s",
        "`traincard.rank`",
        "achieved model FLOP/s of each rank: (6 x trainable + 4 x frozen parameters + the attention "
        "term) x its recent tokens/s (each rank's process reports its own)",
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
        "marked (from the control node's watchdog, which reads the gang's rank states: one per gang)",
    )
    GANG_RANKS_HUNG: Final = MetricSpec(
        "traincard.gang.ranks_hung",
        "gauge",
        "{rank}",
        f"`{Attr.RANK}`, `{Attr.GANG_NODE_INDEX}`, `{Attr.HOST_NAME}`, `{Attr.STACK_WHERE}` (where its "
        "stack says it is stuck, outside the collective the other ranks wait for it in; when recorded)",
        "1 for each rank of a gang that is hung now (heartbeat older than the rank timeout while "
        "nothing says it ended; the ranks waiting for a named culprit are not counted); published like "
        "`traincard.gang.rank_failures`",
    )
    STORE_WRITE_ERRORS: Final = MetricSpec(
        "traincard.store.write_errors",
        "counter",
        "{error}",
        "",
        "failed writes to the store (each retried; the card shows the last error)",
    )

    GENAI_TOKEN_USAGE: Final = MetricSpec(
        "gen_ai.client.token.usage",
        "histogram",
        "{token}",
        "`gen_ai.operation.name`, `gen_ai.request.model`, `gen_ai.token.type` (input, output)",
        "tokens per LLM call of a captured GenAI span (`genai` setting; GenAI conventions), where its "
        "instrumentation does not record it",
    )
    GENAI_OPERATION_DURATION: Final = MetricSpec(
        "gen_ai.client.operation.duration",
        "histogram",
        "s",
        "`gen_ai.operation.name`, `gen_ai.request.model`, `error.type` (failed calls)",
        "duration of an LLM call of a captured GenAI span, where its instrumentation does not record it",
    )


TRAINING_METRICS: Final[tuple[MetricSpec, ...]] = tuple(
    v for v in vars(Metric).values() if isinstance(v, MetricSpec)
)

_GPU: Final = f"`{Attr.HW_ID}`, `{Attr.HW_NAME}`, `{Attr.HW_VENDOR}`"


class SystemMetric:
    """Host, process and GPU instruments (semantic conventions), sampled by ``_telemetry``."""

    CPU_UTILIZATION: Final = MetricSpec(
        "system.cpu.utilization", "gauge", "1", "", "host CPU utilization (0-1)"
    )
    MEMORY_USAGE: Final = MetricSpec(
        "system.memory.usage",
        "updowncounter",
        "By",
        f"`{Attr.MEMORY_STATE}` (used, free, cached, buffers)",
        "host memory",
    )
    MEMORY_UTILIZATION: Final = MetricSpec(
        "system.memory.utilization", "gauge", "1", f"`{Attr.MEMORY_STATE}`", "host memory fraction"
    )
    MEMORY_LIMIT: Final = MetricSpec(
        "system.memory.limit", "updowncounter", "By", "", "host (or cgroup) memory limit"
    )
    DISK_IO: Final = MetricSpec(
        "system.disk.io", "counter", "By", f"`{Attr.DISK_IO_DIRECTION}` (read, write)", "host disk bytes"
    )
    NETWORK_IO: Final = MetricSpec(
        "system.network.io",
        "counter",
        "By",
        f"`{Attr.NETWORK_IO_DIRECTION}` (receive, transmit)",
        "host network bytes",
    )
    PROCESS_CPU_UTILIZATION: Final = MetricSpec(
        "process.cpu.utilization",
        "gauge",
        "1",
        "",
        "this process and its children, fraction of one core x cores",
    )
    PROCESS_MEMORY_USAGE: Final = MetricSpec(
        "process.memory.usage",
        "updowncounter",
        "By",
        "",
        "RSS of this process and its children (the process tree is re-read every 10 s)",
    )
    GPU_UTILIZATION: Final = MetricSpec(
        "hw.gpu.utilization", "gauge", "1", f"{_GPU}, `{Attr.HW_GPU_TASK}`", "GPU busy fraction"
    )
    GPU_MEMORY_USAGE: Final = MetricSpec("hw.gpu.memory.usage", "updowncounter", "By", _GPU, "VRAM used")
    GPU_MEMORY_LIMIT: Final = MetricSpec("hw.gpu.memory.limit", "updowncounter", "By", _GPU, "VRAM total")
    GPU_MEMORY_UTILIZATION: Final = MetricSpec(
        "hw.gpu.memory.utilization", "gauge", "1", _GPU, "VRAM used / total"
    )
    TEMPERATURE: Final = MetricSpec(
        "hw.temperature", "gauge", "Cel", f"{_GPU}, `{Attr.HW_TYPE}`", "GPU temperature"
    )
    POWER: Final = MetricSpec("hw.power", "gauge", "W", f"{_GPU}, `{Attr.HW_TYPE}`", "GPU power draw")
    ENERGY: Final = MetricSpec(
        "hw.energy", "counter", "J", f"{_GPU}, `{Attr.HW_TYPE}`", "GPU energy since driver load"
    )
    ERRORS: Final = MetricSpec(
        "hw.errors",
        "counter",
        "{error}",
        f"`{Attr.HW_ID}`, `{Attr.HW_TYPE}`, `{Attr.ERROR_TYPE}`",
        "ECC / XID errors",
    )
    TORCH_MEMORY: Final = MetricSpec(
        "traincard.gpu.torch.memory",
        "gauge",
        "By",
        f"`{Attr.HW_ID}`, `{Attr.TORCH_MEMORY_KIND}` (allocated, reserved, peak)",
        "this process's torch CUDA allocator, on the GPUs it allocated on",
    )


#: Host, process and GPU instruments, created by ``_telemetry.instruments``.
SYSTEM_METRICS: Final[tuple[MetricSpec, ...]] = tuple(
    v for v in vars(SystemMetric).values() if isinstance(v, MetricSpec)
)
GPU_TORCH_MEMORY: Final = SystemMetric.TORCH_MEMORY.name
#: Name prefixes of the GPU instruments (created only where the sampler reads a GPU).
GPU_PREFIXES: Final = ("hw.", "traincard.gpu.")

#: Semantic-convention fractions the package does not sample but shows as percentages when a
#: user reports them (``Reporter.system``).
REPORTED_FRACTIONS: Final = ("system.filesystem.utilization", "process.memory.utilization")

ALL_METRICS: Final[tuple[MetricSpec, ...]] = TRAINING_METRICS + SYSTEM_METRICS

#: Per-step rows are stored as log events already; the store keeps no copy of this gauge.
NOT_STORED_METRICS: Final = frozenset({Metric.METRIC.name})
