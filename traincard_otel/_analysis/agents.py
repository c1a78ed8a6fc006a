"""An agent loop, from the GenAI-convention spans a run captured (the ``genai`` setting).

An *episode* is a root ``invoke_agent`` span: one whose parent was not captured (the agent's
caller is the user's code, or a span of another kind). Every other captured span belongs to the
episode above it (through its parents; by trace where a parent is missing). *Calls* are model
calls (any operation but ``invoke_agent`` and ``execute_tool``: ``chat``, ``text_completion`` ...)
and tool calls (``execute_tool``, by ``gen_ai.tool.name``). A failed call is a span with an error
status or an ``error.type``. Cost is input and output tokens times the configured price of the
call's model per million tokens (``genai_prices``; ``*`` for any model); None without a price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .._config import parse_prices
from .._data.rundata import Record, RunData
from .._schema import Attr, GenAI
from .._schema.records import GENAI_PRICES_FIELD
from .._types import JsonValue

MAX_EPISODES = 200  # the latest shown; the totals count all
MAX_FAILURES = 100


class Episode(NamedTuple):
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


class ToolStat(NamedTuple):
    name: str
    calls: int
    errors: int
    p50_s: float | None
    p95_s: float | None


class ModelStat(NamedTuple):
    model: str
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    cost: float | None


class FailedCall(NamedTuple):
    time: float
    operation: str
    target: str  # the tool's or the model's name
    error_type: str
    trace: str


class AgentLoop(NamedTuple):
    episodes: tuple[Episode, ...]  # the latest MAX_EPISODES, oldest first
    episode_count: int
    tools: tuple[ToolStat, ...]
    models: tuple[ModelStat, ...]
    failures: tuple[FailedCall, ...]  # the latest MAX_FAILURES
    failure_count: int
    spans: int
    priced: bool


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _num(value: JsonValue) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _failed(span: Record) -> str | None:
    attrs: Mapping[str, JsonValue] = span.get("attributes") or {}
    error = attrs.get(Attr.ERROR_TYPE)
    if error is not None:
        return str(error)
    return "error" if span.get("error") else None


def _price(
    prices: Mapping[str, tuple[float, float]], model: str, tokens_in: int, tokens_out: int
) -> float | None:
    found = prices.get(model, prices.get("*"))
    if found is None:
        return None
    return (tokens_in * found[0] + tokens_out * found[1]) / 1e6


def agent_loop(data: RunData) -> AgentLoop | None:
    """The agent loop of ``data``'s captured spans (None when it captured none)."""
    spans = data.genai_spans
    if not spans:
        return None
    raw_prices = (data.status.get("progress") or {}).get(GENAI_PRICES_FIELD)
    try:
        prices = parse_prices(str(raw_prices)) if raw_prices else {}
    except ValueError:
        prices = {}
    by_id = {str(s.get("span")): s for s in spans}
    roots = {
        str(s.get("span")): s
        for s in spans
        if (s.get("attributes") or {}).get(GenAI.OPERATION_NAME) == GenAI.INVOKE_AGENT
        and str(s.get("parent")) not in by_id
    }
    root_of_trace = {str(s.get("trace")): sid for sid, s in roots.items()}

    def episode_of(span: Record) -> str | None:
        seen = 0
        current: Record | None = span
        while current is not None and seen < 64:
            sid = str(current.get("span"))
            if sid in roots:
                return sid
            current = by_id.get(str(current.get("parent")))
            seen += 1
        return root_of_trace.get(str(span.get("trace")))

    totals: dict[str, list[float]] = {
        sid: [0, 0, 0, 0, 0, 0.0] for sid in roots
    }  # model, tool, in, out, err, cost
    tool_times: dict[str, list[float]] = {}
    tool_errors: dict[str, int] = {}
    model_times: dict[str, list[float]] = {}
    model_figures: dict[str, list[int]] = {}  # errors, input, output
    failures: list[FailedCall] = []
    for span in spans:
        attrs: Mapping[str, JsonValue] = span.get("attributes") or {}
        op = str(attrs.get(GenAI.OPERATION_NAME, ""))
        duration = max(float(span.get("t1") or 0) - float(span.get("t0") or 0), 0.0)
        error = _failed(span)
        episode = episode_of(span)
        row = totals.get(episode) if episode is not None else None
        if op == GenAI.INVOKE_AGENT:
            if error is not None and str(span.get("span")) not in roots:
                failures.append(
                    FailedCall(
                        float(span.get("t1") or 0),
                        op,
                        str(attrs.get(GenAI.AGENT_NAME, "")),
                        error,
                        str(span.get("trace")),
                    )
                )
            continue
        if op == GenAI.EXECUTE_TOOL:
            target = str(attrs.get(GenAI.TOOL_NAME, span.get("name") or "?"))
            tool_times.setdefault(target, []).append(duration)
            tool_errors[target] = tool_errors.get(target, 0) + (error is not None)
            if row is not None:
                row[1] += 1
        else:
            target = str(attrs.get(GenAI.REQUEST_MODEL) or attrs.get(GenAI.RESPONSE_MODEL) or "?")
            tokens_in, tokens_out = _num(attrs.get(GenAI.INPUT_TOKENS)), _num(attrs.get(GenAI.OUTPUT_TOKENS))
            model_times.setdefault(target, []).append(duration)
            fig = model_figures.setdefault(target, [0, 0, 0])
            fig[0] += error is not None
            fig[1] += tokens_in
            fig[2] += tokens_out
            if row is not None:
                row[0] += 1
                row[2] += tokens_in
                row[3] += tokens_out
                row[5] += _price(prices, target, tokens_in, tokens_out) or 0.0
        if error is not None:
            failures.append(FailedCall(float(span.get("t1") or 0), op, target, error, str(span.get("trace"))))
            if row is not None:
                row[4] += 1
    episodes = []
    for sid, root in roots.items():
        n_model, n_tool, t_in, t_out, errors, cost = totals[sid]
        root_error = _failed(root)
        episodes.append(
            Episode(
                trace=str(root.get("trace")),
                agent=str((root.get("attributes") or {}).get(GenAI.AGENT_NAME) or root.get("name") or ""),
                start=float(root.get("t0") or 0),
                duration_s=max(float(root.get("t1") or 0) - float(root.get("t0") or 0), 0.0),
                model_calls=int(n_model),
                tool_calls=int(n_tool),
                input_tokens=int(t_in),
                output_tokens=int(t_out),
                errors=int(errors) + (root_error is not None),
                cost=cost if prices else None,
            )
        )
    episodes.sort(key=lambda e: e.start)
    tools = tuple(
        ToolStat(name, len(times), tool_errors[name], percentile(times, 50), percentile(times, 95))
        for name, times in sorted(tool_times.items())
    )
    models = tuple(
        ModelStat(
            model,
            len(times),
            model_figures[model][0],
            model_figures[model][1],
            model_figures[model][2],
            percentile(times, 50),
            percentile(times, 90),
            percentile(times, 99),
            _price(prices, model, model_figures[model][1], model_figures[model][2]) if prices else None,
        )
        for model, times in sorted(model_times.items())
    )
    failures.sort(key=lambda f: f.time)
    return AgentLoop(
        episodes=tuple(episodes[-MAX_EPISODES:]),
        episode_count=len(episodes),
        tools=tools,
        models=models,
        failures=tuple(failures[-MAX_FAILURES:]),
        failure_count=len(failures),
        spans=len(spans),
        priced=bool(prices),
    )
