"""The card payload's contract: one TypedDict per section, the shape the card's script reads.

The builders return these types (mypy checks every literal against them), the end of
``docs/card-payload.md`` is generated from them (``python -m traincard_otel._read.payload.contract_doc``),
and ``tests/unit/test_card_contract.py`` fails if that page is stale or if the card's script reads a
field of a section that the section's type does not have. A field typed ``JsonObject`` is
passed through as stored (its inner fields are not part of the contract yet).

Wire types are named by the place they fill, here and for the store's JSON (the status snapshot,
the task summary): ``...Section`` for an object under a key (a section of the payload, or an object
inside one), ``...Row`` for one element of a list; :class:`CardPayload` is the whole. No wire type
shares a name with an analysis class (``tests/unit/test_names.py`` keeps it so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from ..._types import JsonObject, JsonValue


class NamesSection(TypedDict):
    """``names``: every wire name the page treats specially (the script keeps no copies)."""

    sections: list[str]
    banners: list[BannerKindRow]
    levels: dict[str, int]
    filter_levels: list[str]
    warning_level: int
    error_level: int
    verdicts: dict[str, str]
    ratio_metrics: list[str]
    byte_metrics: list[str]
    series_colors: dict[str, int]
    groups: dict[str, str]
    rl_groups: list[RlGroupRow]
    axes: dict[str, str]


class RlGroupRow(TypedDict):
    """A section of the RL layout: the charts of ``group``, under ``title``."""

    group: str
    title: str


class CompletionRow(TypedDict):
    """One sampled completion: its step, texts (cut), each reward function's score (in
    ``completions.rewards`` order) and its advantage."""

    step: int | None
    prompt: str
    completion: str
    rewards: list[float | None]
    advantage: float | None


class CompletionsSection(TypedDict):
    """``completions``: an RL run's sampled completions, newest first; ``kept`` of the ``seen``
    rows are stored (the rest were sampled away), ``rows`` the ones shown."""

    rewards: list[str]
    rows: list[CompletionRow]
    kept: int
    seen: int


class BannerKindRow(TypedDict):
    kind: str
    title: str
    icon: str
    alert: bool


class RunCostSection(TypedDict):
    hourly: float
    nodes: int
    so_far: float
    at_eta: float


class RunSection(TypedDict):
    """``run``: the header and status bar."""

    title: str
    status: str
    phase: str
    step: int | None
    max_steps: int | None
    epoch: float | None
    num_epochs: float | None
    started_at: float
    updated_at: float
    elapsed_s: float
    eta_s: float | None
    batch_size: int | None
    world_size: int | None
    attempt: int
    restarts: int
    heartbeat_age_s: float | None
    cost: RunCostSection | None
    kind: str
    unit: str
    metrics_title: str


class BannerRow(TypedDict):
    """One line of ``banners`` (and of ``gang.headline``); ``kind`` is one of ``names.banners``."""

    kind: str
    text: str


class _SeriesPoints(TypedDict):
    label: str
    x: Sequence[float]
    y: Sequence[float | None]


class ChartSeriesRow(_SeriesPoints, total=False):
    """One line of a chart; a live series may also carry a coarse picture of its whole history
    (``head_x``, ``head_y``) that the page back-fills from."""

    head_x: Sequence[float]
    head_y: Sequence[float | None]
    band: str  # "hi" or "lo": an edge of the band around the chart's first series (mean +/- std)


class ChartRow(TypedDict):
    """One of ``charts``: training curves (by step or item), MFU, then system figures (by time)."""

    id: str
    title: str
    group: str
    unit: str
    x: str
    series: list[ChartSeriesRow]


class SummaryRow(TypedDict):
    """One row of ``summary``: a figure reported once or a few times."""

    name: str
    value: float | None
    unit: str
    step: int | None
    count: int
    min: float | None
    max: float | None


class MarkerRow(TypedDict):
    """One of ``markers``: a vertical line on the step charts."""

    x: int
    label: str
    kind: str


class AnomalyRow(TypedDict):
    """One of ``insights.attention``: an anomaly of ``kind`` (its ``label``; ``critical``: shown as an
    error), the metric and step it was found at, and why in one line."""

    step: int | None
    kind: str
    label: str
    critical: bool
    metric: str
    text: str
    time: float | None
    rank: int
    attempt: int


class GoodputCategoryRow(TypedDict):
    key: str
    label: str
    seconds: float


class GoodputSection(TypedDict):
    wall_s: float
    seconds: dict[str, float]
    ratio: float | None
    badput_s: float | None
    rank: int | None
    attempts: int
    running: bool
    categories: list[GoodputCategoryRow]


class RankEfficiencyRow(TypedDict):
    rank: int
    tokens_per_s: float | None
    seq_len: float | None  # tokens per sample
    flops_per_token: float | None
    achieved_flops: float | None
    mfu: float | None


class EfficiencySection(TypedDict):
    flops_per_token: float | None
    seq_len: float | None  # tokens per sample
    achieved_flops: float | None
    accelerators: int
    peak_flops: float | None
    peak_source: str
    dtype: str
    mfu: float | None
    ranks: list[RankEfficiencyRow]


class CostSection(TypedDict):
    hourly: float
    nodes: int
    so_far: float
    tokens: float
    per_1k_tokens: float | None
    badput: float | None


class InsightsSection(TypedDict):
    """``insights``: what needs attention, where the time went, how well the hardware is used."""

    attention: list[AnomalyRow]
    attention_total: int
    goodput: GoodputSection | None
    efficiency: EfficiencySection | None
    mfu_hint: str | None  # how to get MFU, where a training run lacks the model's FLOPs per token
    cost: CostSection | None


class BaselineSeriesRow(TypedDict):
    chart: str
    role: str
    label: str
    x: Sequence[float]
    y: Sequence[float | None]


class BaselineFigureRow(TypedDict):
    kind: str
    name: str
    step: int | None
    verdict: str
    value: float | None
    baseline: float | None
    relative: float | None
    text: str


class BaselineSection(TypedDict):
    """``baseline``: an earlier run overlaid on the charts and compared in the status bar."""

    label: str
    run_id: str | None
    name: str
    note: str | None
    notes: list[str]
    series: list[BaselineSeriesRow]
    status: list[BaselineFigureRow]


class CheckpointRow(TypedDict):
    """One row of ``checkpoints``; ``best`` marks only the latest best-so-far save."""

    step: int | None
    path: str | None
    size_bytes: int | None
    time: float | None
    best: bool
    metric: str | None
    value: float | None
    attempt: int
    rank: int


class _LogRowFields(TypedDict):
    time: float
    level: str
    rank: int
    message: str
    traceback: str | None


class LogRow(_LogRowFields, total=False):
    """One of ``logs``; ``stream`` (stdout, stderr) for captured console output, where the two go to
    different places (where they share a terminal or a file, one pipe keeps their order and no
    stream is known)."""

    stream: str


class LogInfoSection(TypedDict):
    total: int
    shown: int
    trimmed: int
    tail: int
    ranks: list[int]


class TileRow(TypedDict):
    """One of ``system.latest``: a latest reading."""

    name: str
    label: str
    value: float
    unit: str


class SystemSection(TypedDict):
    notes: list[str]
    latest: list[TileRow]
    units: dict[str, str]


class EmptyReasonsSection(TypedDict):
    """``empty``: why a section has nothing to show."""

    training: str
    system: str
    checkpoints: str
    logs: str


class StoreHealthTotalSection(TypedDict, total=False):
    """The ranks' store health added up (absent when no rank recorded one)."""

    write_errors: int
    pending_rows: int
    retrying: bool
    last_error: str
    last_error_at: float


class HealthSection(StoreHealthTotalSection, total=False):
    """``health``: the loss counters; keys other than ``dropped*`` are absent when not recorded."""

    dropped: dict[str, int]
    dropped_total: int
    rejected_total: int
    rejected_top: list[list[str | int]]  # [reason, count], most frequent first


class StackFrameRow(TypedDict):
    """One frame of a recorded stack (innermost first): a code location, no locals."""

    file: str
    line: int
    func: str


class StackThreadRow(TypedDict):
    """One thread of a rank's stack dump: its innermost frames (``depth``: the whole stack's)."""

    name: str
    main: bool
    daemon: bool
    depth: int
    frames: list[StackFrameRow]


class StackGroupRow(TypedDict):
    """Ranks whose training thread has the same stack: where they are, and that stack
    (``threads``: the user's, the main one first; ``own_threads``: traincard's background ones)."""

    ranks: list[int]
    label: str
    where: str
    collective: str | None
    culprit: bool
    reason: str | None
    time: float | None
    threads: list[StackThreadRow]
    own_threads: list[StackThreadRow]


class FlightRecorderSection(TypedDict):
    """``gang.stacks.flight_recorder``: from PyTorch's flight recorder, the collective the most
    advanced ranks entered last (``pending``) and the ranks that have not joined it."""

    pending: JsonObject
    not_joined: list[int]
    ranks: list[JsonObject]
    text: str


class StacksSection(TypedDict):
    """``gang.stacks``: where each rank is, grouped by stack; the culprits stuck outside a
    collective and the ranks waiting for them in one."""

    groups: list[StackGroupRow]
    summary: str
    culprits: list[int]
    waiting: list[int]
    collective: str | None
    flight_recorder: FlightRecorderSection | None


class GangSection(TypedDict):
    """``gang``: a multi-node or multi-rank run's nodes, ranks, stragglers and failures."""

    world_size: int
    num_nodes: int
    nodes: list[JsonObject]
    ranks: list[JsonObject]
    stragglers: JsonObject
    first_failure: JsonObject | None
    hung: list[JsonObject]
    waiting: list[JsonObject]
    waits: list[str]
    aggregates: JsonObject
    failure: JsonObject | None
    headline: list[BannerRow]
    stacks: StacksSection | None


class AnatomyPartRow(TypedDict):
    """One part of a rank's recent steps: its median seconds and its share of the step."""

    part: str
    seconds: float
    share: float


class AnatomyRankRow(TypedDict):
    """One rank's bar: ``role`` is ``slowest`` or ``median`` in a gang, empty for a single rank;
    ``own_s`` is its median step without the wait in communication."""

    rank: int
    role: str
    steps: int
    step_s: float
    own_s: float
    parts: list[AnatomyPartRow]
    unmeasured: list[str]


class AnatomyStepsRow(TypedDict):
    """One rank's parts over steps (the stacked chart): seconds per part, null where not measured."""

    rank: int
    x: Sequence[float]
    parts: dict[str, Sequence[float | None]]


class AnatomySection(TypedDict):
    """``anatomy``: where each step's time goes (data, forward, backward, optimizer,
    communication, other), for one rank or the slowest beside the median rank of a gang."""

    parts: list[str]
    ranks: list[AnatomyRankRow]
    series: list[AnatomyStepsRow]
    ranks_timed: int
    straggler: str | None
    notes: list[str]


class ProfileOperatorRow(TypedDict):
    """An operator of a capture: its calls and self time (ms; on the device for a GPU capture) and
    its share of all operators' self time."""

    name: str
    calls: int
    self_ms: float
    share: float | None


class ProfileRankRow(TypedDict):
    """One rank's capture: its breakdown (``shares`` of the profiled span: computation,
    communication, memory and idle on a GPU; computation, communication and other on a CPU), the
    share of communication hidden under computation (GPU), the top operators, the profiler's own
    cost (its start and stop on the training thread, and the step time before and during it),
    and where the trace is (``trace``: the store's object; ``location``: a path or URL)."""

    rank: int
    steps: list[int] | None
    device: bool
    shares: dict[str, float]
    span_s: float | None
    overlap: float | None
    operators: list[ProfileOperatorRow]
    overhead: float | None
    start_s: float | None
    stop_s: float | None
    step_before_s: float | None
    step_during_s: float | None
    trace: str
    location: str
    trace_bytes: int
    events_cut: int


class ProfileCaptureRow(TypedDict):
    """A capture: what asked for it (``trigger``: ``request``, or a ``profile_on`` kind with the
    ``detail`` it saw), when, its steps, its ranks (the first 8 of ``rank_count``, 2 live) and the
    command that copies its trace out."""

    id: str
    trigger: str
    detail: str
    asked_at: float | None
    steps: list[int] | None
    rank_count: int
    ranks: list[ProfileRankRow]
    export: str


class ProfilesSection(TypedDict):
    """``profiles``: the run's profile captures, newest first (``total`` counts them all)."""

    captures: list[ProfileCaptureRow]
    total: int


class SweepRow(TypedDict):
    """One branch of a sweep: its varying hyperparameters and where its main metric stands."""

    id: str
    pathspec: str
    status: str
    step: int | None
    hp: dict[str, str | int | float | bool | None]
    latest: float | None
    best: float | None
    best_step: float | None
    duration_s: float | None
    goodput: float | None
    mfu: float | None
    failure: str | None
    self: bool
    is_best: bool


class SweepCurveRow(TypedDict):
    """A branch's main metric, averaged into a few points ([step, value])."""

    id: str
    points: list[list[float]]
    best: bool
    self: bool


class SweepSection(TypedDict):
    """``sweep``: the branches of this task's foreach (or the runs compared), from their summaries."""

    title: str
    metric: str | None
    higher_is_better: bool
    varying: list[str]
    constant: dict[str, str | int | float | bool | None]
    rows: list[SweepRow]
    curves: list[SweepCurveRow]
    best: str | None
    total: int
    hidden_rows: int
    hidden_curves: int
    standalone: bool
    notes: list[str]


class StatsSection(TypedDict):
    dropped: dict[str, int]
    corrupt_segments: int
    segments: int
    points: int


class AgentEpisodeRow(TypedDict):
    """One episode (a root ``invoke_agent`` span) and what it called."""

    trace: str
    agent: str
    start: float
    duration_s: float
    model_calls: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    errors: int
    cost: float | None


class AgentToolRow(TypedDict):
    """Calls of one tool (``gen_ai.tool.name``)."""

    name: str
    calls: int
    errors: int
    error_share: float
    p50_s: float | None
    p95_s: float | None


class AgentModelRow(TypedDict):
    """Calls of one model, with their tokens and latency percentiles."""

    model: str
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    cost: float | None


class AgentFailureRow(TypedDict):
    """A failed call: its operation, tool or model, error type and episode's trace."""

    time: float
    operation: str
    target: str
    error_type: str
    trace: str


class AgentsSection(TypedDict):
    """``agents``: the agent loop of the GenAI spans the run captured (the ``genai`` setting);
    episodes newest first."""

    episode_count: int
    spans: int
    priced: bool
    failure_count: int
    episodes: list[AgentEpisodeRow]
    tools: list[AgentToolRow]
    models: list[AgentModelRow]
    failures: list[AgentFailureRow]


class CardPayload(TypedDict):
    """The whole payload: what ``build_payload`` returns and the card's script draws."""

    v: int
    final: bool
    live: bool
    generated_at: float
    names: NamesSection
    run: RunSection
    banners: list[BannerRow]
    charts: list[ChartRow]
    summary: list[SummaryRow]
    markers: list[MarkerRow]
    insights: InsightsSection
    baseline: BaselineSection | None
    checkpoints: list[CheckpointRow]
    logs: list[LogRow]
    log_info: LogInfoSection
    failure: JsonValue
    system: SystemSection
    empty: EmptyReasonsSection
    health: HealthSection
    gang: GangSection | None
    anatomy: AnatomySection | None
    profiles: ProfilesSection | None
    completions: CompletionsSection | None
    agents: AgentsSection | None
    sweep: SweepSection | None
    stats: StatsSection
