"""Agent loops from standard spans: GenAI-convention spans made through the OTel API's global
tracer provider reach the store, the analysis, the card's Agent loop section (in Chromium) and the
``gen_ai.client.*`` metrics, and the user's provider keeps its own exporters.

Three episodes (root ``invoke_agent`` spans), each with model calls and tool calls, one tool call
failing, run once per module through a real pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from traincard_otel._read.card.page import assemble_html
from traincard_otel._read.payload import build_payload
from traincard_otel._read.run import LoadedRun
from traincard_otel.testing import capture

from tests.support.browser_helpers import open_html, screenshot

# Attribute keys as an instrumentation spells them (the GenAI conventions).
OP, MODEL, TOOL, AGENT = (
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.tool.name",
    "gen_ai.agent.name",
)
IN, OUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"


class Agent:
    def __init__(self, run: LoadedRun, user_spans: InMemorySpanExporter) -> None:
        self.run, self.user_spans = run, user_spans


def _users_provider() -> InMemorySpanExporter:
    """The application's own provider and exporter (set before traincard starts, as they would be)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def _episode(tracer: trace.Tracer, n: int, fail_tool: bool) -> None:
    with tracer.start_as_current_span(
        "invoke_agent planner", attributes={OP: "invoke_agent", AGENT: "planner"}
    ):
        for turn in range(2):
            with tracer.start_as_current_span(
                "chat gpt-test", attributes={OP: "chat", MODEL: "gpt-test", IN: 100 + n, OUT: 20 + turn}
            ):
                pass
            with tracer.start_as_current_span(
                "execute_tool search", attributes={OP: "execute_tool", TOOL: "search"}
            ) as tool:
                if fail_tool and turn == 1:
                    tool.set_attribute("error.type", "TimeoutError")
                    tool.set_status(Status(StatusCode.ERROR, "search timed out"))
        with tracer.start_as_current_span(
            "execute_tool <calc>", attributes={OP: "execute_tool", TOOL: "<calc>"}
        ):
            pass
        with tracer.start_as_current_span(
            "chat small", attributes={OP: "chat", MODEL: "small-model", IN: 10, OUT: 5}
        ):
            pass
    with tracer.start_as_current_span("not genai"):  # an ordinary span of the application
        pass


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    user_spans = _users_provider()
    with capture(genai=True, genai_prices="gpt-test=2:8,*=1:1") as cap:
        tracer = trace.get_tracer("my.agent")
        for n in range(3):
            _episode(tracer, n, fail_tool=n == 1)
        yield Agent(cap.load(), user_spans)
    user_spans.shutdown()  # the provider stays global (the API sets one per process): keep nothing more


def test_episodes_tools_models_and_failures(agent: Agent) -> None:
    loop = agent.run.insights.agents if agent.run.insights else None
    assert loop is not None and loop.episode_count == 3 and loop.spans == 3 * 7
    assert [(e.agent, e.model_calls, e.tool_calls) for e in loop.episodes] == [("planner", 3, 3)] * 3
    assert [e.errors for e in loop.episodes] == [0, 1, 0]
    assert [e.input_tokens for e in loop.episodes] == [2 * (100 + n) + 10 for n in range(3)]
    first = loop.episodes[0]  # 2 x gpt-test (100 in, 20/21 out) at 2:8, small-model (10 in, 5 out) at 1:1
    assert first.cost == pytest.approx((200 * 2 + 41 * 8 + 10 + 5) / 1e6)
    tools = {t.name: t for t in loop.tools}
    assert tools["search"].calls == 6 and tools["search"].errors == 1 and tools["<calc>"].calls == 3
    models = {m.model: m for m in loop.models}
    assert models["gpt-test"].calls == 6 and models["gpt-test"].output_tokens == 3 * 41
    assert models["gpt-test"].p50_s is not None and models["gpt-test"].p99_s >= models["gpt-test"].p50_s
    (failure,) = loop.failures
    assert (failure.operation, failure.target, failure.error_type) == (
        "execute_tool",
        "search",
        "TimeoutError",
    )
    # the application's provider still exported everything, its own span included
    assert len(agent.user_spans.get_finished_spans()) >= 3 * 8


@pytest.mark.browser
def test_the_card_draws_the_agent_loop(browser: Any, tmp_path: Path, agent: Agent) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    payload = build_payload(agent.run, final=True)
    section = payload["agents"]
    assert section is not None and section["episode_count"] == 3 and section["priced"]
    open_html(browser, assemble_html(payload, live=False), tmp_path)
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return document.body.dataset.error || ''") == ""
    assert browser.find_element(By.ID, "tc-agents").is_displayed()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tc-agent-episodes tbody tr")) == 3
    calc = browser.find_element(By.CSS_SELECTOR, '#tc-agent-tools tr[data-tool="<calc>"]')
    assert calc.find_element(By.TAG_NAME, "td").text == "<calc>"  # text, not markup
    search = browser.find_element(By.CSS_SELECTOR, '#tc-agent-tools tr[data-tool="search"]')
    assert "16.7%" in search.text
    failures = browser.find_elements(By.CSS_SELECTOR, "#tc-agent-failures tbody tr")
    assert len(failures) == 1 and "TimeoutError" in failures[0].text
    heads = [
        th.get_attribute("textContent")
        for th in browser.find_elements(By.CSS_SELECTOR, "#tc-agent-models th")
    ]
    assert heads[-1] == "cost" and "p99" in heads
    browser.execute_script("document.getElementById('tc-agents').scrollIntoView()")
    screenshot(browser, "card-agent-loop")


def test_model_calls_go_to_the_genai_client_metrics() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from traincard_otel._write.pipeline.genai import GenAISpanProcessor
    from traincard_otel._write.queue import ReportQueue

    reader = InMemoryMetricReader()
    processor = GenAISpanProcessor(ReportQueue(), MeterProvider(metric_readers=[reader]).get_meter("t"))
    provider = TracerProvider()  # private here: the global one is the module's
    provider.add_span_processor(processor)
    _episode(provider.get_tracer("my.agent"), 0, fail_tool=False)
    with provider.get_tracer("opentelemetry.instrumentation.openai_v2").start_as_current_span(
        "chat", attributes={OP: "chat", MODEL: "gpt-test", IN: 1000, OUT: 1}
    ):
        pass  # that instrumentation records the metrics itself
    processor.record_pending()  # the pipeline's schedule thread does, before each drain
    points: dict[tuple[str, str], int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, str(p.attributes.get("gen_ai.token.type", p.attributes.get(MODEL))))
                    points[key] = points.get(key, 0) + int(p.sum) if "token" in metric.name else p.count
    assert points[("gen_ai.client.token.usage", "input")] == 2 * 100 + 10
    assert points[("gen_ai.client.token.usage", "output")] == 41 + 5
    assert points[("gen_ai.client.operation.duration", "gpt-test")] == 2
    assert points[("gen_ai.client.operation.duration", "small-model")] == 1
    assert len(processor.queue.items) == 8  # every GenAI span, the instrumented one too
