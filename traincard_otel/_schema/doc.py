"""``docs/schema.md``, generated from the names and metric specs."""

from __future__ import annotations

from typing import Final

from .anomaly_kinds import ANOMALY_KINDS
from .metrics import ALL_METRICS
from .names import GENAI_SEMCONV_VERSION, PHASE_SPAN_PREFIX, RUN_SPAN, Attr, Event, GenAI

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
        'reported), "parts"?}`, one list each, one entry per step; `parts` (when any step carries '
        "its anatomy): 5 seconds per step, row-major, data, forward, backward, optimizer and "
        "communication (NaN where not measured); attributes as above",
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
        Event.RUN_STOPPED_EARLY,
        f"a `stop_on` rule stopped training: `{Attr.STATUS}`, `{Attr.GUARD_TRIGGER}` (the kind), "
        f"`{Attr.GUARD_REASON}`, `{Attr.GUARD_TRIGGER_STEP}`, `{Attr.STEP}` (the last step), "
        f"`{Attr.CHECKPOINT_PATH}` (the checkpoint saved on stopping, when one was)",
    ),
    (
        Event.GUARD_STOP_REQUESTED,
        f"a `stop_on` rule tripped (the trainer stops at its next step end): `{Attr.GUARD_TRIGGER}`, "
        f"`{Attr.STEP}`, `{Attr.ANOMALY_VALUE}`",
    ),
    (
        Event.RUN_FAILED,
        f"`{Attr.EXCEPTION_TYPE}`, `{Attr.EXCEPTION_MESSAGE}`, `{Attr.EXCEPTION_STACKTRACE}`; body: the "
        "failure summary (type, message, traceback, phase, step, last metrics, last system, verdict)",
    ),
    (
        Event.RUN_RESUMED,
        f"a new attempt: `{Attr.ATTEMPT}`, `{Attr.STEP}`, `{Attr.RESUME_SOURCE}` (from the trainer); how "
        f"the attempt before ended (from the store): `{Attr.PREVIOUS_ATTEMPT}`, `{Attr.PREVIOUS_STEP}`, "
        f"`{Attr.PREVIOUS_END}` (exception, signal, finished, vanished), `{Attr.PREVIOUS_EXCEPTION_TYPE}`, "
        f"`{Attr.SIGNAL}`, `{Attr.PREVIOUS_VERDICT}`, `{Attr.PREVIOUS_EVIDENCE}`",
    ),
    (Event.RUN_REWIND, f"a step counter moving backwards: `{Attr.STEP}`, `{Attr.REWIND_FROM}`"),
    (Event.STALL_STARTED, f"watchdog: `{Attr.STALL_IDLE_S}`, `{Attr.STALL_THRESHOLD_S}`"),
    (Event.STALL_CLEARED, f"watchdog: `{Attr.STALL_DURATION_S}`"),
    (
        Event.RANK_LOST,
        f"a rank whose heartbeat stopped: `{Attr.LOST_RANK}`, `{Attr.HOST_NAME}`, `{Attr.STEP}`, "
        f"`{Attr.HEARTBEAT_AGE_S}`",
    ),
    (Event.RANK_RECOVERED, f"a lost rank heard from again: `{Attr.LOST_RANK}`"),
    (
        Event.RANK_STACK,
        f"where a stalled (or asked) rank is: `{Attr.RANK}`, `{Attr.HOST_NAME}`, `{Attr.STACK_REASON}` "
        f"(stall, request, sigterm, exit), `{Attr.STACK_WHERE}` (its training thread's place, as the card "
        f"says it), `{Attr.STACK_REQUEST}` (on request); the body is the dump: every thread's innermost "
        "frames (file, line, function; no locals), bounded to 12 KB",
    ),
    (
        Event.GANG_FIRST_FAILURE,
        "the first rank of a `@parallel` gang to fail (the control node's watchdog says it once, from "
        f"the gang's rank states): `{Attr.RANK}`, "
        f"`{Attr.GANG_NODE_INDEX}`, `{Attr.HOST_NAME}`, `{Attr.PROCESS_PID}`, `{Attr.GANG_FAILURE_HOW}`, "
        f"`{Attr.STEP}`, `{Attr.GANG_HEARTBEAT_AT}`, `{Attr.GANG_CONSEQUENCES}`, `{Attr.SIGNAL}` and "
        f"`{Attr.PROCESS_EXIT_CODE}` (when known), `{Attr.STACK_WHERE}` (where its stack says it is, when "
        "recorded: a hung rank outside the collective the others wait in)",
    ),
    (Event.GANG_RANK_HUNG, "a rank whose heartbeat stopped while nothing says it ended; same attributes"),
    (
        Event.ANOMALY,
        "an anomaly of one of the kinds below (rules: `traincard_otel/_analysis/anomalies/`, set by "
        "`TRAINCARD_ANOMALIES`); "
        f"body: the one-line explanation; `{Attr.ANOMALY_KIND}`, `{Attr.METRIC_NAME}`, `{Attr.STEP}`, "
        f"`{Attr.ANOMALY_VALUE}`, `{Attr.ANOMALY_EXPECTED}` (the median or best value it was judged "
        "against, when there is one)",
    ),
    (
        Event.GENAI_SPAN,
        "a span with `gen_ai.operation.name` ended through the process's global tracer provider "
        "(`genai` setting; GenAI conventions " + GENAI_SEMCONV_VERSION + "), time = its end; attributes: its "
        f"`{GenAI.PREFIX}*` attributes and `{Attr.ERROR_TYPE}`; body "
        '`{"name", "t0", "t1", "trace", "span", "parent", "error", "scope"}` (unix seconds, hex ids, '
        "the instrumentation scope); the card's Agent loop section is drawn from them",
    ),
    (
        Event.COMPLETIONS,
        "an online RL trainer's scored completions at a logging step (TRL's GRPO, RLOO ...), from the "
        f'trainer\'s own data; `{Attr.STEP}`; body `{{"prompt": [text or messages], "completion": [...], '
        '"rewards": {reward function: [score]}, "advantage": [value]}`; the reader keeps the latest '
        "steps and a sample of earlier ones (`traincard_otel/_data/completions.py`)",
    ),
    (
        Event.PROFILE_CAPTURED,
        "a `torch.profiler` capture of this rank's steps written to the store (`traincard profile`, or "
        f"a `profile_on` trigger): `{Attr.PROFILE_ID}`, `{Attr.PROFILE_TRIGGER}` (request, or the kind "
        f"that started it), `{Attr.RANK}`, `{Attr.STEP}` (its last step), `{Attr.PROFILE_TRACE}` (the "
        "gzip'd Chrome trace's object in the store, beside its summary)",
    ),
    (
        Event.OOM_SNAPSHOT,
        "the CUDA allocator's snapshot saved at an out-of-memory error (`memory_history` setting): "
        f"`{Attr.RANK}`, `{Attr.STEP}`, `{Attr.MEMORY_SNAPSHOT}` (the pickled snapshot's object in the "
        "store); body: the largest live allocations with the Python frames that made them, and the peak",
    ),
)

_RESOURCE_DOC: Final = (
    f"`{Attr.SERVICE_NAME}` (flow name unless `OTEL_SERVICE_NAME`), `{Attr.MF_FLOW_NAME}`, "
    f"`{Attr.MF_RUN_ID}`, "
    f"`{Attr.MF_STEP_NAME}`, `{Attr.MF_TASK_ID}`, `{Attr.MF_RETRY_COUNT}`, `{Attr.MF_ORIGIN_RUN_ID}`, "
    f"`{Attr.MF_PATHSPEC}`, `{Attr.RANK}`, `{Attr.LOCAL_RANK}`, `{Attr.WORLD_SIZE}`, `{Attr.NODE_RANK}`, "
    f"`{Attr.ROLE}` (rank or launcher), `{Attr.NODE_INDEX}`, `{Attr.PARALLEL_NODE_INDEX}`, "
    f"`{Attr.PARALLEL_NUM_NODES}`, `{Attr.PARALLEL_CONTROL_TASK_ID}` (in a `@parallel` gang), "
    f"`{Attr.HOST_NAME}`, `{Attr.PROCESS_PID}`, plus everything in `OTEL_RESOURCE_ATTRIBUTES`."
)


def render_markdown() -> str:
    """``docs/schema.md``: every name above as a page."""
    out = [
        "# Emitted names",
        "",
        "Every metric, span, event and resource attribute the package emits. Generated from",
        "`traincard_otel/_schema/` (`python -m traincard_otel._schema > docs/schema.md`);",
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
        f"traceback, `{Attr.LOG_STREAM}` (stdout, stderr) for captured console output where the two "
        f"go to different places |",
        "",
        "## Anomaly kinds",
        "",
        f"The values of `{Attr.ANOMALY_KIND}`, one name each for the detector, `stop_on` and `notify_on`,",
        "the card and the alert rules in `collector-config/` (a critical kind is shown as an error and",
        "alerted on as critical).",
        "",
        "| kind | card label | meaning | severity |",
        "|---|---|---|---|",
    ]
    out += [
        f"| `{k.name}` | {k.label} | {k.meaning} | {'critical' if k.critical else 'warning'} |"
        for k in ANOMALY_KINDS
    ]
    out += [
        "",
        "## Resource attributes",
        "",
        _RESOURCE_DOC,
        "",
    ]
    return "\n".join(out)
