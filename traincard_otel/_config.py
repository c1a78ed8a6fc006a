"""Settings: one frozen dataclass, one resolution order (argument > environment > default)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from . import environment_variables as ev
from ._schema.anomaly_kinds import ANOMALY_KIND_NAMES, AnomalyKind
from ._types import Reported
from .exceptions import ConfigError

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Resolved configuration of one process."""

    service_name: str | None = None
    store: str | None = None
    flush_interval_s: float = 2.0
    system_interval_s: float = 2.0
    system: bool = True
    buffer_cap: int = 200_000
    report_ranks: str = "0"
    refresh_interval_s: float = 3.0
    shutdown_timeout_s: float = 3.0
    log_level: str = "INFO"
    stall_timeout_s: float = 60.0
    rank_timeout_s: float = 120.0
    hourly_cost: float | None = None
    attempt: int | None = None
    sdk_disabled: bool = False
    traces_exporters: tuple[str, ...] = ()
    metrics_exporters: tuple[str, ...] = ()
    logs_exporters: tuple[str, ...] = ()
    metric_export_interval_ms: float = 60_000.0
    capture_console: bool = True
    flight_recorder: bool = True
    anomalies: str = ""  # the anomaly rules' text, parsed by the pipeline at start (docs in README)
    baseline: str = "auto"  # "auto", "none", or a run to compare with (normalized by baseline_spec)
    stop_on: tuple[str, ...] = ()  # the kinds that stop training (STOP_KINDS)
    notify: tuple[str, ...] = dataclasses.field(default=(), repr=False)  # webhook URLs: secrets
    notify_on: tuple[str, ...] = ()  # the kinds notified (NOTIFY_KINDS); empty: all of them
    genai: bool = False
    genai_prices: str = ""  # model=input:output per million tokens, checked by parse_prices
    anatomy: bool = True  # time each step's parts from the framework's hooks
    profile_on: tuple[str, ...] = ()  # the kinds that start a profile once (PROFILE_KINDS)
    memory_history: bool = False  # record CUDA allocations, for the snapshot at an out-of-memory error

    def redacted(self, name: str) -> Reported:
        """A setting's value as it may be shown: the webhook URLs only counted."""
        value: Reported = getattr(self, name)
        return f"<{len(self.notify)} webhook URL(s), redacted>" if name == "notify" else value


# What ``stop_on`` may name: the anomaly kinds (``docs/schema.md``) and a stall.
STOP_KINDS: Final = (*ANOMALY_KIND_NAMES, "stall")
# What ``profile_on`` may name: anomaly kinds seen on the rank, and a straggler found in the gang.
PROFILE_KINDS: Final = (
    AnomalyKind.THROUGHPUT_DROP,
    "straggler",
    AnomalyKind.LOSS_SPIKE,
    AnomalyKind.GRAD_EXPLOSION,
)
# What ``notify_on`` may name: the stop kinds, and what happens to the run or its ranks.
NOTIFY_KINDS: Final = (*STOP_KINDS, "rank_lost", "rank_hung", "failure", "stopped_early", "run_end")


def _parse_kinds(valid: tuple[str, ...]) -> Callable[[str, str], tuple[str, ...]]:
    def parse(name: str, raw: str) -> tuple[str, ...]:
        kinds = tuple(dict.fromkeys(k.strip().lower() for k in raw.split(",") if k.strip()))
        unknown = [k for k in kinds if k not in valid]
        if unknown:
            raise ConfigError(
                f"{name}: unknown kind(s) {', '.join(unknown)}; valid kinds: {', '.join(valid)}"
            )
        return kinds

    return parse


def _parse_urls(name: str, raw: str) -> tuple[str, ...]:
    urls = tuple(u.strip() for u in raw.replace("\n", ",").split(",") if u.strip())
    for i, url in enumerate(urls, 1):
        if not url.lower().startswith(("http://", "https://")):  # the URL itself is a secret: not shown
            raise ConfigError(f"{name}: entry {i} of {len(urls)} is not an http:// or https:// URL")
    return urls


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use true or false")


def _parse_positive(kind: Callable[[str], T]) -> Callable[[str, str], T]:
    def parse(name: str, raw: str) -> T:
        try:
            value = kind(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number") from None
        if value <= 0:  # type: ignore[operator]
            raise ConfigError(f"{name}={raw!r} must be greater than 0")
        return value

    return parse


def _parse_exporters(name: str, raw: str) -> tuple[str, ...]:
    if raw.strip().lower() == "none":
        return ()
    names = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    if "none" in names:
        raise ConfigError(f"{name}={raw!r}: 'none' must be the whole value, not part of a list")
    return names


def _parse_report_ranks(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in {"0", "all"}:
        raise ConfigError(f"{name}={raw!r}: use 0 (rank 0 reports training metrics) or all")
    return value


def baseline_spec(raw: str | None) -> str:
    """The ``baseline`` setting normalized: ``auto`` (also for None), ``none`` (also for ``off``
    and an empty value), or the run as given (a pathspec, a run id, a store folder or URL)."""
    if raw is None:
        return "auto"
    value = str(raw).strip()
    if value.lower() in {"", "none", "off", "false"}:
        return "none"
    if value.lower() == "auto":
        return "auto"
    return value


def parse_prices(text: str) -> dict[str, tuple[float, float]]:
    """``model=input:output,...`` (per million tokens; ``*`` for any model) as {model: (input, output)}.

    Raises:
        ValueError: a pair that is not ``model=number:number``, or a negative price.
    """
    prices: dict[str, tuple[float, float]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        model, sep, pair = part.rpartition("=")
        cost_in, colon, cost_out = pair.partition(":")
        try:
            value = (float(cost_in), float(cost_out))
        except ValueError:
            value = (-1.0, -1.0)
        if not sep or not model.strip() or not colon or min(value) < 0:
            raise ValueError(f"{part!r} is not model=input:output (prices per million tokens, >= 0)")
        prices[model.strip()] = value
    return prices


def _check_prices(name: str, raw: str) -> str:
    try:
        parse_prices(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}; for example gpt-4o=2.5:10,*=1:4") from None
    return raw.strip()


def _parse_level(name: str, raw: str) -> str:
    value = raw.strip().upper()
    if value not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "OFF"}:
        raise ConfigError(f"{name}={raw!r}: use DEBUG, INFO, WARNING, ERROR, CRITICAL or OFF")
    return value


_ENV: dict[str, tuple[str, Callable[[str, str], Reported]]] = {
    "service_name": ("OTEL_SERVICE_NAME", lambda n, r: r.strip() or None),
    "store": (ev.TRAINCARD_STORE, lambda n, r: r.strip() or None),
    "flush_interval_s": (ev.TRAINCARD_FLUSH_INTERVAL, _parse_positive(float)),
    "system_interval_s": (ev.TRAINCARD_SYSTEM_INTERVAL, _parse_positive(float)),
    "system": (ev.TRAINCARD_SYSTEM, _parse_bool),
    "buffer_cap": (ev.TRAINCARD_BUFFER_CAP, _parse_positive(int)),
    "report_ranks": (ev.TRAINCARD_REPORT_RANKS, _parse_report_ranks),
    "refresh_interval_s": (ev.TRAINCARD_REFRESH_INTERVAL, _parse_positive(float)),
    "shutdown_timeout_s": (ev.TRAINCARD_SHUTDOWN_TIMEOUT, _parse_positive(float)),
    "hourly_cost": (ev.TRAINCARD_HOURLY_COST, _parse_positive(float)),
    "stall_timeout_s": (ev.TRAINCARD_STALL_TIMEOUT, _parse_positive(float)),
    "log_level": (ev.TRAINCARD_LOG_LEVEL, _parse_level),
    "rank_timeout_s": (ev.TRAINCARD_RANK_TIMEOUT, _parse_positive(float)),
    "attempt": (ev.TRAINCARD_ATTEMPT, lambda n, r: int(r)),
    "sdk_disabled": ("OTEL_SDK_DISABLED", _parse_bool),
    "traces_exporters": ("OTEL_TRACES_EXPORTER", _parse_exporters),
    "metrics_exporters": ("OTEL_METRICS_EXPORTER", _parse_exporters),
    "logs_exporters": ("OTEL_LOGS_EXPORTER", _parse_exporters),
    "metric_export_interval_ms": ("OTEL_METRIC_EXPORT_INTERVAL", _parse_positive(float)),
    "capture_console": (ev.TRAINCARD_CAPTURE_CONSOLE, _parse_bool),
    "flight_recorder": (ev.TRAINCARD_FLIGHT_RECORDER, _parse_bool),
    "anomalies": (ev.TRAINCARD_ANOMALIES, lambda n, r: r.strip()),
    "baseline": (ev.TRAINCARD_BASELINE, lambda n, r: baseline_spec(r)),
    "stop_on": (ev.TRAINCARD_STOP_ON, _parse_kinds(STOP_KINDS)),
    "notify": (ev.TRAINCARD_NOTIFY, _parse_urls),
    "notify_on": (ev.TRAINCARD_NOTIFY_ON, _parse_kinds(NOTIFY_KINDS)),
    "genai": (ev.TRAINCARD_GENAI, _parse_bool),
    "genai_prices": (ev.TRAINCARD_GENAI_PRICES, lambda n, r: _check_prices(n, r)),
    "anatomy": (ev.TRAINCARD_ANATOMY, _parse_bool),
    "profile_on": (ev.TRAINCARD_PROFILE_ON, _parse_kinds(PROFILE_KINDS)),
    "memory_history": (ev.TRAINCARD_MEMORY_HISTORY, _parse_bool),
}
# Settings given as a list or a comma-separated text, parsed like their variable.
_LISTS = frozenset({"stop_on", "notify", "notify_on", "profile_on"})
# Settings whose variable set to an empty value means something (an empty baseline: none).
_EMPTY_MEANS_SOMETHING = frozenset({"baseline"})


def resolve(
    overrides: Mapping[str, Reported] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Build :class:`Settings` from explicit ``overrides``, then the environment, then defaults.

    Raises:
        ConfigError: an argument name is unknown or an environment variable cannot be parsed.
    """
    env = os.environ if environ is None else environ
    overrides = dict(overrides or {})
    fields = {f.name for f in dataclasses.fields(Settings)}
    unknown = set(overrides) - fields
    if unknown:
        raise ConfigError(f"unknown setting(s) {sorted(unknown)}; known: {sorted(fields)}")
    values: dict[str, Reported] = {}
    for field, (var, parse) in _ENV.items():
        given = overrides.get(field)
        if given is not None:
            if field in _LISTS:
                text = given if isinstance(given, str) else ",".join(str(v) for v in given)
                values[field] = parse(f"{field}=", text)
            elif field == "genai_prices":  # checked at configure(), as the variable is
                values[field] = _check_prices("genai_prices=", str(given))
            else:
                values[field] = baseline_spec(given) if field == "baseline" else given
            continue
        raw = env.get(var)
        if raw is not None and (raw.strip() != "" or field in _EMPTY_MEANS_SOMETHING):
            values[field] = parse(var, raw)
    # OTEL_SDK_DISABLED is the spec's kill switch; an explicit False argument must not undo it.
    if "OTEL_SDK_DISABLED" in env and env["OTEL_SDK_DISABLED"].strip():
        values["sdk_disabled"] = values.get("sdk_disabled") or _parse_bool(
            "OTEL_SDK_DISABLED", env["OTEL_SDK_DISABLED"]
        )
    return Settings(**values)
