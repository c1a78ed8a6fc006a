"""How well the accelerators are used: model FLOPs per token, achieved FLOP/s and MFU per rank.

Model FLOPs per token are the adapter's ``flops_per_token`` progress field plus its attention term
times the measured sequence length (tokens per sample); achieved FLOP/s is that times the rank's
recent median tokens per second; MFU divides by the peak the adapter found (None without one).
:func:`rank_efficiency` is that definition, for a read run's ranks (:func:`efficiency`) and for
the writer's own rank as its steps go by (:class:`ThroughputWindow`).
"""

from __future__ import annotations

import collections
import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Final

from .._data.rundata import RunData, Series
from .._types import JsonObject, JsonValue
from .flops import mfu

RECENT_STEPS: Final = 50


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


@dataclasses.dataclass(frozen=True)
class RankEfficiency:
    """One rank's figures over its recent steps."""

    rank: int
    tokens_per_s: float
    seq_len: float | None
    flops_per_token: float
    achieved_flops: float
    mfu: float | None


@dataclasses.dataclass(frozen=True)
class Efficiency:
    """The run's figures: every rank's, their sum, and MFU against the peak of all of them."""

    flops_per_token: float
    seq_len: float | None
    achieved_flops: float | None
    peak_flops: float | None
    peak_source: str
    dtype: str
    mfu: float | None
    ranks: tuple[RankEfficiency, ...]

    @property
    def accelerators(self) -> int:
        return len(self.ranks)

    def as_dict(self) -> JsonObject:
        return {
            "flops_per_token": self.flops_per_token,
            "seq_len": self.seq_len,
            "achieved_flops": self.achieved_flops,
            "accelerators": self.accelerators,
            "peak_flops": self.peak_flops,
            "peak_source": self.peak_source,
            "dtype": self.dtype,
            "mfu": self.mfu,
            "ranks": [dataclasses.asdict(r) for r in self.ranks],
        }


def _recent_median(series: Series | None) -> float | None:
    if series is None or not len(series):
        return None
    latest = series.attempts[-1]
    values = [
        v
        for v, a in zip(series.values[-RECENT_STEPS:], series.attempts[-RECENT_STEPS:], strict=False)
        if a == latest and v == v
    ]
    return statistics.median(values) if values else None


def rank_efficiency(
    rank: int, tokens_per_s: float | None, samples_per_s: float | None, progress: Mapping[str, JsonValue]
) -> RankEfficiency | None:
    """One rank's figures from its recent median tokens/s and samples/s and the adapter's progress
    fields (None without FLOPs per token or a token rate)."""
    dense = _number(progress.get("flops_per_token"))
    if not dense or not tokens_per_s:
        return None
    attention = _number(progress.get("attention_flops_per_position")) or 0.0
    peak = _number(progress.get("peak_flops"))
    seq = tokens_per_s / samples_per_s if samples_per_s else None
    per_token = dense + attention * (seq or 0.0)
    return RankEfficiency(
        rank=rank,
        tokens_per_s=tokens_per_s,
        seq_len=seq,
        flops_per_token=per_token,
        achieved_flops=per_token * tokens_per_s,
        mfu=mfu(per_token, tokens_per_s, peak) if peak else None,
    )


def efficiency(data: RunData) -> Efficiency | None:
    """Model FLOPs per token, achieved FLOP/s and MFU (None when no adapter reported FLOPs)."""
    progress = data.status.get("progress") or {}
    dense = _number(progress.get("flops_per_token"))
    if not dense:
        return None
    peak = _number(progress.get("peak_flops"))
    per_rank: list[RankEfficiency] = []
    for rank in sorted(int(k) for k in data.step_times):
        tokens = _recent_median(data.throughput.get(f"tokens_per_second{{rank={rank}}}"))
        samples = _recent_median(data.throughput.get(f"samples_per_second{{rank={rank}}}"))
        found = rank_efficiency(rank, tokens, samples, progress)
        if found is not None:
            per_rank.append(found)
    achieved_total = sum(r.achieved_flops for r in per_rank) if per_rank else None
    first = per_rank[0] if per_rank else None
    return Efficiency(
        flops_per_token=first.flops_per_token if first else dense,
        seq_len=first.seq_len if first else None,
        achieved_flops=achieved_total,
        peak_flops=peak,
        peak_source=str(progress.get("peak_source") or ""),
        dtype=str(progress.get("compute_dtype") or ""),
        mfu=achieved_total / (peak * len(per_rank)) if peak and per_rank and achieved_total else None,
        ranks=tuple(per_rank),
    )


class ThroughputWindow:
    """One rank's token and sample rates over its last :data:`RECENT_STEPS` timed steps that
    counted them, as they go by: what :func:`rank_efficiency` needs, kept by the writer."""

    def __init__(self) -> None:
        self._tokens: collections.deque[float] = collections.deque(maxlen=RECENT_STEPS)
        self._samples: collections.deque[float] = collections.deque(maxlen=RECENT_STEPS)

    def add(self, durations: Sequence[float], samples: Sequence[int], tokens: Sequence[int]) -> None:
        """Timed steps (a NaN or zero duration is no timed step; zero counts count nothing), in
        order: only the last ones that count each are looked at."""
        if not any(tokens) and not any(samples):
            return  # nothing counted (a loop without samples or tokens): no rate to keep
        tok_rates: list[float] = []
        sample_rates: list[float] = []
        for d, n, tok in zip(reversed(durations), reversed(samples), reversed(tokens), strict=True):
            if len(tok_rates) >= RECENT_STEPS and len(sample_rates) >= RECENT_STEPS:
                break
            if d == d and d > 0:
                if tok and len(tok_rates) < RECENT_STEPS:
                    tok_rates.append(tok / d)
                if n and len(sample_rates) < RECENT_STEPS:
                    sample_rates.append(n / d)
        self._tokens.extend(reversed(tok_rates))
        self._samples.extend(reversed(sample_rates))

    def figures(self, rank: int, progress: Mapping[str, JsonValue]) -> RankEfficiency | None:
        tokens = statistics.median(self._tokens) if self._tokens else None
        samples = statistics.median(self._samples) if self._samples else None
        return rank_efficiency(rank, tokens, samples, progress)
