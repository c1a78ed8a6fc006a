"""Span names, attribute keys and log event names."""

from __future__ import annotations

from typing import Final

# -- span names --------------------------------------------------------------------------------
RUN_SPAN: Final = "training.run"
PHASE_SPAN_PREFIX: Final = "training."  # + the phase name: training.train, training.eval ...

# -- thread names ------------------------------------------------------------------------------
#: Every thread this package starts is named ``traincard-...``: stack dumps tell them from the user's.
OWN_THREAD_PREFIX: Final = "traincard-"


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
    STACK_REASON: Final = "traincard.stack.reason"
    STACK_WHERE: Final = "traincard.stack.where"
    STACK_REQUEST: Final = "traincard.stack.request"
    RESUME_SOURCE: Final = "traincard.resume.source"
    PREVIOUS_ATTEMPT: Final = "traincard.previous_attempt"
    PREVIOUS_STEP: Final = "traincard.previous_step"
    PREVIOUS_END: Final = "traincard.previous_end"  # exception, signal, finished, vanished
    PREVIOUS_EXCEPTION_TYPE: Final = "traincard.exception_type"
    PREVIOUS_VERDICT: Final = "traincard.verdict"
    PREVIOUS_EVIDENCE: Final = "traincard.evidence"
    ANOMALY_KIND: Final = "traincard.anomaly.kind"
    ANOMALY_VALUE: Final = "traincard.anomaly.value"
    ANOMALY_EXPECTED: Final = "traincard.anomaly.expected"
    GUARD_TRIGGER: Final = "traincard.guard.trigger"  # the stop_on kind that stopped the run
    GUARD_TRIGGER_STEP: Final = "traincard.guard.trigger_step"
    GUARD_REASON: Final = "traincard.guard.reason"
    GOODPUT_CATEGORY: Final = "traincard.goodput.category"
    STEP_PART: Final = "traincard.step.part"  # a part of a step's anatomy (data, forward, ..., other)
    PROFILE_ID: Final = "traincard.profile.id"
    PROFILE_TRIGGER: Final = "traincard.profile.trigger"  # request, or the kind that started it
    PROFILE_TRACE: Final = "traincard.profile.trace"  # the trace's object name in the store
    MEMORY_SNAPSHOT: Final = "traincard.memory.snapshot"  # a CUDA memory snapshot's object in the store
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
    PROCESS_PID: Final = "process.pid"
    PROCESS_EXIT_CODE: Final = "process.exit.code"
    SERVICE_NAME: Final = "service.name"
    HW_ID: Final = "hw.id"
    HW_NAME: Final = "hw.name"
    HW_VENDOR: Final = "hw.vendor"
    HW_TYPE: Final = "hw.type"
    HW_GPU_TASK: Final = "hw.gpu.task"
    MEMORY_STATE: Final = "system.memory.state"
    DISK_IO_DIRECTION: Final = "disk.io.direction"
    NETWORK_IO_DIRECTION: Final = "network.io.direction"
    ERROR_TYPE: Final = "error.type"
    EXCEPTION_TYPE: Final = "exception.type"
    EXCEPTION_MESSAGE: Final = "exception.message"
    EXCEPTION_STACKTRACE: Final = "exception.stacktrace"


# -- the OTel GenAI semantic conventions we read and write ---------------------------------------
#: The GenAI conventions (development status) as of this version of the semantic conventions.
GENAI_SEMCONV_VERSION: Final = "1.37.0"


class GenAI:
    """Attribute keys and values of the GenAI conventions that agent-loop spans carry."""

    OPERATION_NAME: Final = "gen_ai.operation.name"
    PROVIDER_NAME: Final = "gen_ai.provider.name"
    REQUEST_MODEL: Final = "gen_ai.request.model"
    RESPONSE_MODEL: Final = "gen_ai.response.model"
    INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
    OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
    TOKEN_TYPE: Final = "gen_ai.token.type"
    TOOL_NAME: Final = "gen_ai.tool.name"
    AGENT_NAME: Final = "gen_ai.agent.name"
    CONVERSATION_ID: Final = "gen_ai.conversation.id"
    PREFIX: Final = "gen_ai."
    # gen_ai.operation.name values
    INVOKE_AGENT: Final = "invoke_agent"
    EXECUTE_TOOL: Final = "execute_tool"
    CHAT: Final = "chat"
    TEXT_COMPLETION: Final = "text_completion"
    GENERATE_CONTENT: Final = "generate_content"
    EMBEDDINGS: Final = "embeddings"
    # instrumentation scopes that record the client metrics themselves (OpenTelemetry's own)
    METRIC_SCOPES: Final = ("opentelemetry.instrumentation.",)


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
    RUN_STOPPED_EARLY: Final = "traincard.run.stopped_early"
    GUARD_STOP_REQUESTED: Final = "traincard.guard.stop_requested"
    RUN_RESUMED: Final = "traincard.run.resumed"
    RUN_REWIND: Final = "traincard.run.rewind"
    STALL_STARTED: Final = "traincard.stall.started"
    STALL_CLEARED: Final = "traincard.stall.cleared"
    RANK_LOST: Final = "traincard.rank.lost"
    RANK_RECOVERED: Final = "traincard.rank.recovered"
    RANK_STACK: Final = "traincard.rank.stack"
    GANG_FIRST_FAILURE: Final = "traincard.gang.first_failure"
    GANG_RANK_HUNG: Final = "traincard.gang.rank_hung"
    ANOMALY: Final = "traincard.anomaly"
    GENAI_SPAN: Final = "traincard.genai.span"  # a GenAI span of the process's global tracer provider
    COMPLETIONS: Final = "traincard.completions"  # an RL trainer's sampled completions, one logged batch
    PROFILE_CAPTURED: Final = "traincard.profile.captured"  # a torch.profiler capture written to the store
    OOM_SNAPSHOT: Final = "traincard.memory.oom_snapshot"  # the CUDA allocator's snapshot saved at an OOM

    @staticmethod
    def run_ended(status: str) -> str:
        """The lifecycle event for a run that ended with ``status`` (finished, terminated ...)."""
        return f"traincard.run.{status}"


def event_names() -> frozenset[str]:
    """Every event name defined above."""
    return frozenset(v for k, v in vars(Event).items() if k.isupper() and isinstance(v, str))
