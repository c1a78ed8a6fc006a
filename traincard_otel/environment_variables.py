"""Environment variables read by traincard-otel.

Precedence for every setting: an argument to :func:`traincard_otel.configure` beats the
environment variable, which beats the default. Standard ``OTEL_*`` variables keep their meaning
from the OpenTelemetry specification (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_SDK_DISABLED``, ``OTEL_{TRACES,METRICS,LOGS}_EXPORTER``, ``OTEL_EXPORTER_OTLP_*``,
``OTEL_METRIC_EXPORT_INTERVAL``).
"""

from __future__ import annotations

TRAINCARD_DIR = "TRAINCARD_DIR"
"""Where the telemetry store lives outside Metaflow: a directory, or ``s3://bucket/prefix``,
``gs://bucket/prefix``, ``az://container/prefix`` (through Metaflow's storage clients and
credentials). Default: ``./traincard-data/<run name>``."""

TRAINCARD_STORE = "TRAINCARD_STORE"
"""Where this process writes, set by the step process for its children (torchrun, accelerate
launch), or by hand: a directory, ``file://<dir>``, ``s3://``, ``gs://``, ``az://<bucket>/<prefix>``
or ``metaflow://<ds-type>|<ds-root>|<prefix>``. ``off`` disables the
store exporter. Default: the Metaflow task's datastore inside a step, else ``TRAINCARD_DIR``."""

TRAINCARD_ATTEMPT = "TRAINCARD_ATTEMPT"
"""Attempt number when not running under Metaflow (Metaflow's retry count wins). Default: 0."""

TRAINCARD_FLUSH_INTERVAL = "TRAINCARD_FLUSH_INTERVAL"
"""Seconds between store flushes; a ``kill -9`` loses at most this much. Default: 2."""

TRAINCARD_SYSTEM_INTERVAL = "TRAINCARD_SYSTEM_INTERVAL"
"""Seconds between system/GPU samples. Default: 2."""

TRAINCARD_SYSTEM = "TRAINCARD_SYSTEM"
"""``false`` turns off system and GPU sampling. Default: true."""

TRAINCARD_BUFFER_CAP = "TRAINCARD_BUFFER_CAP"
"""Most records held in memory waiting for the store; beyond it records are dropped and counted.
Default: 200000."""

TRAINCARD_REPORT_RANKS = "TRAINCARD_REPORT_RANKS"
"""Which ranks report training metrics: ``0`` (default) or ``all``. Every rank always reports
heartbeats, progress and step times."""

TRAINCARD_REFRESH_INTERVAL = "TRAINCARD_REFRESH_INTERVAL"
"""Seconds between live card updates pushed by the step process. Default: 3."""

TRAINCARD_SHUTDOWN_TIMEOUT = "TRAINCARD_SHUTDOWN_TIMEOUT"
"""Upper bound in seconds on flushing at exit, whatever the exporters do. Default: 3."""

TRAINCARD_HOURLY_COST = "TRAINCARD_HOURLY_COST"
"""Price per hour of the job's machines; the card then shows cost so far and at ETA. Default: unset."""

TRAINCARD_RUN_NAME = "TRAINCARD_RUN_NAME"
"""Name of the run directory under ``TRAINCARD_DIR`` outside Metaflow; give launches the same name
to continue one run (a retry, a resume). Default: the launcher's run id (torchrun, ``accelerate
launch``, ``srun``), else ``run-<UTC start time>-<pid>``: each launch of a script is a run of its own."""

TRAINCARD_STALL_TIMEOUT = "TRAINCARD_STALL_TIMEOUT"
"""Floor in seconds of the stall detector: no step or heartbeat for max(this, 20 x the recent
median step time), with GPUs idle where GPU figures exist, is a stall. Default: 60."""

TRAINCARD_RANK_TIMEOUT = "TRAINCARD_RANK_TIMEOUT"
"""Seconds without a heartbeat after which rank 0 declares another running rank lost. Default: 120."""

TRAINCARD_LOG_LEVEL = "TRAINCARD_LOG_LEVEL"
"""Python ``logging`` records at or above this level go to the card's log tail and the OTel log
stream (``OFF`` disables the bridge). Default: INFO."""

TRAINCARD_FLIGHT_RECORDER = "TRAINCARD_FLIGHT_RECORDER"
"""Keep PyTorch's flight recorder on (a ring of the last 2000 collectives each rank entered, NCCL
and gloo alike) by setting ``TORCH_FR_BUFFER_SIZE=2000`` when neither it nor
``TORCH_NCCL_TRACE_BUFFER_SIZE`` is set; a stalled rank's stack dump then says which collective it
entered last, and the card which ranks have not joined the one the others wait in. It takes effect
when telemetry starts before the process group is made (``configure()`` before
``init_process_group``, ``@traincard``, ``python -m traincard_otel.torchrun``). Default: true;
false leaves PyTorch's own default (off)."""

TRAINCARD_CAPTURE_CONSOLE = "TRAINCARD_CAPTURE_CONSOLE"
"""Record what the process writes to stdout and stderr (``print``, progress bars, C extensions,
child processes) as log lines in the card and the OTel log stream, while it still reaches the
terminal and Metaflow's task logs unchanged (a write that follows another within 0.1 s reaches
them up to 0.1 s later: the reader gathers writes rather than waking for each). Default: true
wherever telemetry starts (``@traincard``, ``instrument()``, ``Reporter()`` and a plain
``configure()`` alike: they share one pipeline);
``configure(capture_console=False)`` or this variable set to false turns it off, and
``traincard_otel.testing.capture`` turns it off for tests."""

TRAINCARD_ANOMALIES = "TRAINCARD_ANOMALIES"
"""The anomaly rules (loss spikes, NaN/inf, exploding gradient norms, throughput drops, eval
regressions, an RL run's reward collapse and KL blow-up; ``traincard_otel/_analysis/anomalies/``
documents each): ``off``, or comma-separated ``field=value`` pairs overriding the defaults, for example
``spike_mads=8,window=100,throughput_steps=20``. Fields: ``window`` (50), ``min_points`` (20),
``spike_mads`` (6), ``spike_min_relative`` (0.1), ``cooldown`` (10), ``grad_factor`` (10),
``throughput_fraction`` (0.5), ``throughput_steps`` (10), ``eval_margin`` (0.05),
``collapse_share`` (0.95), ``collapse_std`` (1e-6), ``collapse_steps`` (5), ``kl_max`` (10),
``kl_factor`` (10). Default: on."""

TRAINCARD_PEAK_FLOPS = "TRAINCARD_PEAK_FLOPS"
"""Peak FLOP/s of one accelerator (``3.12e14``), for the model FLOPs utilisation (MFU) of
accelerators the built-in table of NVIDIA GPUs does not know, or to compare against another
figure. Default: the table's dense figure for the GPU and the training dtype; unknown on a CPU."""

TRAINCARD_GENAI = "TRAINCARD_GENAI"
"""Capture agent loops: spans that follow the OTel GenAI conventions (``gen_ai.operation.name``:
``invoke_agent``, ``chat``, ``execute_tool`` ...), ended through the process's global tracer
provider, go to the store and the card's Agent loop section, and model calls to the
``gen_ai.client.*`` metrics. A span processor is added to the global SDK provider, or a provider
is created and set when none is; the user's is never replaced. Default: false."""

TRAINCARD_GENAI_PRICES = "TRAINCARD_GENAI_PRICES"
"""Model prices for the agent loop's cost per episode, in currency units per million tokens:
``model=input:output`` pairs separated by commas, ``*`` for any other model (for example
``gpt-4o=2.5:10,*=1:4``). Default: unset (no cost shown)."""

TRAINCARD_BASELINE = "TRAINCARD_BASELINE"
"""The run the card compares with (loss and eval curves overlaid, "ahead / behind baseline" in the
status bar): ``auto`` for the latest earlier run of the same flow whose same step succeeded, in
the run's own namespace and metadata; a Metaflow pathspec ``Flow/run[/step[/task]]`` or a run id of
the same flow; a store folder or URL; ``none`` (or empty) for no comparison. ``@traincard(baseline=...)``
beats it. A baseline that is missing or cannot be read is a note in the card, never an error.
Default: auto."""

TRAINCARD_STOP_ON = "TRAINCARD_STOP_ON"
"""What stops training gracefully (comma-separated, e.g. ``nan,loss_spike``): any anomaly kind
(``docs/schema.md`` lists them; ``nan`` is NaN or infinity in a loss or gradient norm) and
``stall``. The HF and Lightning adapters save a checkpoint and stop the
trainer; a raw loop or Accelerate reads ``reporter.should_stop``. The run ends *stopped early*.
Also ``@traincard(stop_on=...)``. An unknown kind fails at start. Default: none."""

TRAINCARD_NOTIFY = "TRAINCARD_NOTIFY"
"""Webhook URLs (comma-separated) that receive a Slack-compatible JSON post for each anomaly,
stall, lost or hung rank, failure, early stop and the end of the run, from a background thread
(bounded timeout, rate-limited per kind). Secrets: never stored, shown or logged. Default: none."""

TRAINCARD_NOTIFY_ON = "TRAINCARD_NOTIFY_ON"
"""The kinds notified (comma-separated): the ``TRAINCARD_STOP_ON`` kinds and ``rank_lost``,
``rank_hung``, ``failure``, ``stopped_early``, ``run_end``. Default: all of them."""

TRAINCARD_ANATOMY = "TRAINCARD_ANATOMY"
"""Time each training step's parts (data, forward, backward, optimizer, communication, the rest)
from the framework's own hooks, on every rank, for the card's Step anatomy section and the
``traincard.step.part.duration`` histogram. Default: true."""

TRAINCARD_PROFILE_ON = "TRAINCARD_PROFILE_ON"
"""Kinds that start a ``torch.profiler`` capture of the next 5 steps by themselves
(comma-separated): ``throughput_drop``, ``loss_spike``, ``grad_explosion`` (anomalies seen by the
rank, which captures itself) and ``straggler`` (a rank of the gang found slower than the others:
every rank captures). At most once per 30 minutes per kind; the card's Profiles section says what
triggered each capture. Also ``configure(profile_on=...)`` and ``@traincard(profile_on=...)``.
Default: none."""

TRAINCARD_MEMORY_HISTORY = "TRAINCARD_MEMORY_HISTORY"
"""Record PyTorch's CUDA allocation history (``torch.cuda.memory._record_memory_history``, Python
frames, the last 100 000 events) so that a CUDA out-of-memory error saves the allocator's snapshot
into the store before the process dies, and the failure summary names the largest live allocations
with the code that made them. Costs about 2 µs per allocation while on. Default: false."""
