"""configure(): telemetry set up for this process, and the live card where a Metaflow step draws one.

A door that sets telemetry up (``configure()``, ``instrument()`` and the doors built on it) also
starts the live card's refresher when the code runs inside a Metaflow step that has
``@card(type="traincard")`` but not ``@traincard`` (which drives its card itself): the Metaflow side
starts it, never the :class:`~traincard_otel.Reporter`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._write import pipeline as _pipeline
from ._write.report.reporter import Reporter


def configure(
    *,
    store: str | None = None,
    service_name: str | None = None,
    flush_interval_s: float | None = None,
    system: bool | None = None,
    system_interval_s: float | None = None,
    buffer_cap: int | None = None,
    report_ranks: str | None = None,
    refresh_interval_s: float | None = None,
    shutdown_timeout_s: float | None = None,
    log_level: str | None = None,
    stall_timeout_s: float | None = None,
    rank_timeout_s: float | None = None,
    hourly_cost: float | None = None,
    capture_console: bool | None = None,
    anomalies: str | None = None,
    baseline: str | None = None,
    stop_on: str | Sequence[str] | None = None,
    notify: str | Sequence[str] | None = None,
    notify_on: str | Sequence[str] | None = None,
    attempt: int | None = None,
    genai: bool | None = None,
    genai_prices: str | None = None,
    anatomy: bool | None = None,
    profile_on: str | Sequence[str] | None = None,
    memory_history: bool | None = None,
) -> Reporter:
    """Set up telemetry for this process and return a :class:`Reporter`.

    Each argument beats its ``TRAINCARD_*``/``OTEL_*`` environment variable, which beats the
    default; None (the default) leaves the setting to the variable. ``docs/configuration.md`` lists
    them with their variables and defaults: ``store`` (a directory or bucket URL, or ``"off"``),
    ``service_name``, ``flush_interval_s``, ``system`` and ``system_interval_s`` (host and GPU
    sampling), ``buffer_cap``, ``report_ranks`` (``"0"`` or ``"all"``), ``refresh_interval_s``,
    ``shutdown_timeout_s``, ``log_level``, ``stall_timeout_s``, ``rank_timeout_s``,
    ``hourly_cost``, ``capture_console``, ``anomalies`` (the rules' text, or ``"off"``),
    ``baseline``, ``stop_on`` (what stops training: anomaly kinds such as ``nan`` or ``loss_spike``,
    and ``stall``), ``notify`` (webhook
    URLs), ``notify_on`` (the kinds notified), ``attempt``, ``genai`` (capture agent loops from
    GenAI spans of the global tracer provider), ``genai_prices`` (``model=input:output`` per
    million tokens), ``anatomy`` (time each step's parts), ``profile_on`` (kinds that start a
    profile: ``throughput_drop``, ``straggler``, ``loss_spike``, ``grad_explosion``) and
    ``memory_history`` (CUDA allocation history, for the snapshot at an out-of-memory error).
    Calling it again with the same settings (or none) returns a reporter of the running pipeline.

    Raises:
        ConfigError: a setting is invalid, or differs from the running pipeline's.
    """
    given = {k: v for k, v in locals().items() if v is not None}
    reporter = Reporter(**given)
    pipeline = _pipeline.active()
    if pipeline is not None:
        from .metaflow.refresher import drive_live_card

        drive_live_card(pipeline)
    return reporter


def active_reporter() -> Reporter | None:
    """A reporter of this process's running pipeline, if telemetry is set up."""
    pipeline = _pipeline.active()
    return Reporter._bound(pipeline) if pipeline is not None else None
