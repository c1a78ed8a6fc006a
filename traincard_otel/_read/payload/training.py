"""The training section: one chart per curve (eval series beside their train series), throughput
and step-time charts, and the run-summary table for figures that are not worth a chart.

The summary rule (``docs/card-payload.md``): a metric goes to the table, not a chart, when

* its name is bookkeeping: ``*_runtime``, ``*_per_second``, ``total_flos`` / ``*_flos``; or
* it is ``train_<x>`` reported at most twice while ``<x>`` has a curve (the Trainer's run average,
  e.g. ``train_loss``); or
* its chart would hold a single point while the run's longest training curve has at least
  ``SUMMARY_MIN_CURVE`` points (a figure reported once at the end of a run).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from ..._data.rundata import RunData, Series
from ..._schema.keys import series_key, tags_text
from .contract import ChartRow, ChartSeriesRow, SummaryRow
from .kind import TRAINING, RunKind
from .series import LIVE_SCAN_MAX, Mode, by_rank, head, rank_points, stretches, xy
from .units import DIMENSIONLESS, metric_unit

NOT_CHARTED = frozenset({"epoch"})  # shown in the status bar
SUMMARY_MIN_CURVE = 10
_BOOKKEEPING = re.compile(r"(?:_runtime|_per_second|(?:^|_)flos)$")

# Known curves first.
_CHART_ORDER = {"loss": 0, "learning_rate": 1, "lr": 1, "grad_norm": 2}


def is_bookkeeping(name: str) -> bool:
    """Whether ``name`` is a run-bookkeeping figure (``*_runtime``, ``*_per_second``, ``total_flos``)."""
    return bool(_BOOKKEEPING.search(name))


_PERCENTILE = re.compile(r"^(?P<base>.+?)_(?P<p>p\d{1,2}(?:\.\d+)?)(?P<unit>_[a-z]+)?$")


def chart_name(metric: str, plain: str = "train") -> tuple[str, str]:
    """(chart, series label): ``eval_loss`` joins ``loss`` as its eval series, ``latency_p90_s``
    joins ``latency_s`` as its p90 series; ``plain`` labels the rest (the run kind's phase)."""
    if metric.startswith("eval_"):
        return metric[5:], "eval"
    if metric.startswith("train_"):
        return metric[6:], "train"
    m = _PERCENTILE.match(metric)
    if m:
        return m["base"] + (m["unit"] or ""), m["p"]
    return metric, plain


def _split(data: RunData) -> tuple[list[Series], list[Series]]:
    """(charted series, summary series) by the rule in the module docstring."""
    charted: list[Series] = []
    summary: list[Series] = []
    plain = {s.name for s in data.metrics.values()}
    for _key, series in sorted(data.metrics.items()):
        name = series.name
        if name in NOT_CHARTED:
            continue
        if is_bookkeeping(name) or (name.startswith("train_") and name[6:] in plain and len(series) <= 2):
            summary.append(series)
        else:
            charted.append(series)
    longest = max((len(s) for s in charted), default=0)
    if longest >= SUMMARY_MIN_CURVE:
        points: dict[str, int] = {}
        for s in charted:
            points[chart_name(s.name)[0]] = points.get(chart_name(s.name)[0], 0) + len(s)
        summary += [s for s in charted if points[chart_name(s.name)[0]] <= 1]
        charted = [s for s in charted if points[chart_name(s.name)[0]] > 1]
    return charted, summary


def summary_table(data: RunData) -> list[SummaryRow]:
    """Rows of the run-summary table: the last value of each summary figure, and how often it came."""
    _charted, summary = _split(data)
    rows: list[SummaryRow] = []
    for series in summary:
        finite = [v for v in series.values if v == v and abs(v) != float("inf")]
        steps = [s for s in series.steps if s is not None]
        rows.append(
            {
                "name": series_key(series.name, series.tags),
                "value": finite[-1] if finite else None,
                "unit": metric_unit(series.name),
                "step": steps[-1] if steps else None,
                "count": len(series),
                "min": min(finite) if len(finite) > 1 else None,
                "max": max(finite) if len(finite) > 1 else None,
            }
        )
    return rows


def training_charts(
    data: RunData, mode: Mode, kind: RunKind = TRAINING, skip: Collection[str] = ()
) -> list[ChartRow]:
    """Curves by step (by item in an evaluation or inference loop): known ones first, then the
    rest by name, then throughput and step time; not the metrics keyed in ``skip`` (drawn by
    another section)."""
    charted, _summary = _split(data)
    charts: dict[str, ChartRow] = {}
    for series in charted:
        if skip and series_key(series.name, series.tags) in skip:
            continue
        chart_id, label = chart_name(series.name, kind.series)
        if series.tags:
            label = tags_text(series.tags)
        chart = charts.setdefault(
            chart_id,
            {
                "id": chart_id,
                "title": _title(chart_id),
                "group": "training",
                "unit": metric_unit(chart_id),
                "x": kind.unit,
                "series": [],
            },
        )
        chart["series"] += series_entries(series, label, mode)
    for chart in charts.values():  # train first, then eval, then the rest: stable colours
        chart["series"].sort(key=lambda s: (0 if s["label"].startswith("train") else 1, _natural(s["label"])))
    ordered = sorted(charts.values(), key=lambda c: (_CHART_ORDER.get(c["id"], 50), c["id"]))
    return ordered + throughput_charts(data, mode)


def _title(chart_id: str) -> str:
    """``latency_s`` is titled "latency" (its unit says seconds); ``items_per_s`` keeps its name."""
    if chart_id.endswith("_s") and not chart_id.endswith("_per_s") and metric_unit(chart_id) == "s":
        return chart_id[:-2]
    return chart_id


def _natural(label: str) -> tuple[float, str]:
    """p50 before p90 before p99; other labels by name."""
    m = re.fullmatch(r"p(\d+(?:\.\d+)?)", label)
    return (float(m[1]), "") if m else (float("inf"), label)


def series_entries(series: Series, label: str, mode: Mode) -> list[ChartSeriesRow]:
    out: list[ChartSeriesRow] = []
    parts = by_rank(series)
    for rank, per_rank in parts:
        rank_label = f"{label} rank {rank}" if len(parts) > 1 else label
        pieces = stretches(per_rank, tail=LIVE_SCAN_MAX if mode.live else None)
        for n, span in pieces:
            xs, ys = xy(per_rank, mode, span=span)
            if not xs and mode.live:
                continue
            entry: ChartSeriesRow = {
                "label": rank_label if n == 0 else f"{rank_label} (resumed {n})",
                "x": xs,
                "y": ys,
            }
            if mode.live and mode.heads and len(pieces) == 1 and n == 0 and len(per_rank) > len(xs):
                entry["head_x"], entry["head_y"] = head(per_rank, "step")
            out.append(entry)
    return out


def _rank_series(items: Iterable[tuple[str, Series]], mode: Mode) -> list[ChartSeriesRow]:
    pairs = list(items)
    budget = rank_points(len(pairs))  # many ranks share one chart's points
    return [
        {"label": label, "x": x, "y": y} for label, s in pairs for x, y in [xy(s, mode, max_points=budget)]
    ]


def throughput_charts(data: RunData, mode: Mode) -> list[ChartRow]:
    """Tokens/s and samples/s per rank, and the step time per rank."""
    out: list[ChartRow] = []
    for name, unit in (("tokens_per_second", "tokens/s"), ("samples_per_second", "samples/s")):
        series = [s for s in data.throughput.values() if s.name == name]
        if series:
            out.append(
                {
                    "id": f"throughput_{name}",
                    "title": unit,
                    "group": "training",
                    "unit": unit,
                    "x": "step",
                    "series": _rank_series(((f"rank {s.tags.get('rank', '0')}", s) for s in series), mode),
                }
            )
    if data.step_times:
        out.append(
            {
                "id": "step_time",
                "title": "step time per rank",
                "group": "training",
                "unit": "s",
                "x": "step",
                "series": _rank_series(((f"rank {r}", s) for r, s in sorted(data.step_times.items())), mode),
            }
        )
    return out


__all__ = [
    "DIMENSIONLESS",
    "chart_name",
    "is_bookkeeping",
    "series_entries",
    "summary_table",
    "training_charts",
]
