"""The Agent loop section: episodes, calls per episode, tools, models and failed calls, drawn from
the analysis of the run's GenAI spans (:mod:`traincard_otel._analysis.agents`)."""

from __future__ import annotations

from ..._analysis.agents import AgentLoop
from .contract import AgentsSection

LIVE_EPISODES = 20
LIVE_FAILURES = 10
MAX_NAMES = 100  # tools and models with the most calls; a live update shows 20


def agents_section(loop: AgentLoop | None, live: bool) -> AgentsSection | None:
    """The section (None when the run captured no GenAI span)."""
    if loop is None:
        return None
    episodes = loop.episodes[-LIVE_EPISODES:] if live else loop.episodes
    failures = loop.failures[-LIVE_FAILURES:] if live else loop.failures
    most = 20 if live else MAX_NAMES
    tools = sorted(loop.tools, key=lambda t: -t.calls)[:most]
    models = sorted(loop.models, key=lambda m: -m.calls)[:most]
    return {
        "episode_count": loop.episode_count,
        "spans": loop.spans,
        "priced": loop.priced,
        "failure_count": loop.failure_count,
        "episodes": [
            {
                "trace": e.trace,
                "agent": e.agent,
                "start": e.start,
                "duration_s": e.duration_s,
                "model_calls": e.model_calls,
                "tool_calls": e.tool_calls,
                "input_tokens": e.input_tokens,
                "output_tokens": e.output_tokens,
                "errors": e.errors,
                "cost": e.cost,
            }
            for e in reversed(episodes)
        ],
        "tools": [
            {
                "name": t.name,
                "calls": t.calls,
                "errors": t.errors,
                "error_share": t.errors / t.calls if t.calls else 0.0,
                "p50_s": t.p50_s,
                "p95_s": t.p95_s,
            }
            for t in sorted(tools, key=lambda t: t.name)
        ],
        "models": [
            {
                "model": m.model,
                "calls": m.calls,
                "errors": m.errors,
                "input_tokens": m.input_tokens,
                "output_tokens": m.output_tokens,
                "p50_s": m.p50_s,
                "p90_s": m.p90_s,
                "p99_s": m.p99_s,
                "cost": m.cost,
            }
            for m in sorted(models, key=lambda m: m.model)
        ],
        "failures": [
            {
                "time": f.time,
                "operation": f.operation,
                "target": f.target,
                "error_type": f.error_type,
                "trace": f.trace,
            }
            for f in reversed(failures)
        ],
    }
