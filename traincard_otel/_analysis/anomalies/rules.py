"""The anomaly rules' thresholds (:class:`AnomalyRules`), and the ``TRAINCARD_ANOMALIES`` text
that sets them (the rules are described in :mod:`traincard_otel._analysis.anomalies`)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class AnomalyRules:
    """The thresholds of the rules (described in :mod:`traincard_otel._analysis.anomalies`)."""

    window: int = 50
    min_points: int = 20
    spike_mads: float = 6.0
    spike_min_relative: float = 0.1
    cooldown: int = 10
    grad_factor: float = 10.0
    throughput_fraction: float = 0.5
    throughput_steps: int = 10
    eval_margin: float = 0.05
    collapse_share: float = 0.95
    collapse_std: float = 1e-6
    collapse_steps: int = 5
    kl_max: float = 10.0
    kl_factor: float = 10.0

    def __post_init__(self) -> None:
        if self.window < 3 or not 2 <= self.min_points <= self.window:
            raise ValueError(f"need window >= 3 and 2 <= min_points <= window; got {self}")
        if self.throughput_steps < 1 or self.cooldown < 0 or self.collapse_steps < 1:
            raise ValueError(f"need throughput_steps >= 1, collapse_steps >= 1 and cooldown >= 0; got {self}")
        for name in (
            "spike_mads",
            "spike_min_relative",
            "grad_factor",
            "eval_margin",
            "collapse_share",
            "collapse_std",
            "kl_max",
            "kl_factor",
        ):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be a number >= 0; got {getattr(self, name)!r}")
        if not 0 < self.throughput_fraction < 1:
            raise ValueError(f"throughput_fraction must be between 0 and 1; got {self.throughput_fraction!r}")

    @classmethod
    def parse(cls, text: str) -> AnomalyRules | None:
        """Rules from ``TRAINCARD_ANOMALIES``'s text: ``off`` is None (no detection), ``""`` the
        defaults, else ``field=value`` pairs separated by commas.

        Raises:
            ValueError: an unknown field, a value that is not a number, or a rule out of range;
                the message names what to change.
        """
        text = text.strip()
        if text.lower() in ("off", "false", "0", "no", "none"):
            return None
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        values: dict[str, float | int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            name = name.strip()
            if not sep or name not in fields:
                raise ValueError(
                    f"TRAINCARD_ANOMALIES: {part!r} is not field=value with a field among "
                    f"{', '.join(fields)} (or 'off')"
                )
            try:
                values[name] = int(raw) if fields[name] == "int" else float(raw)
            except ValueError:
                raise ValueError(f"TRAINCARD_ANOMALIES: {name}={raw.strip()!r} is not a number") from None
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"TRAINCARD_ANOMALIES: {exc}") from None
