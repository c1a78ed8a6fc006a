"""What capturing GenAI spans costs the thread that ends them: a span's start and end through an SDK
tracer provider with and without the ``genai`` processor, side by side.

    python -m benchmarks.bench_genai_spans [--spans 20000] [--rounds 6] [--quick] [--json out.json]

Each round ends ``spans`` model-call spans (GenAI attributes, token counts) through a private SDK
provider, once with :class:`~traincard_otel._write.pipeline.genai.GenAISpanProcessor` added (the event on
the queue, the two client histograms) and once without, in ABBA order; the row is thread CPU per
span. The client histograms are recorded later, on the pipeline's schedule thread, and are not in
the row. An agent's model call takes hundreds of milliseconds: microseconds are the scale to read.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._harness import interleave, report, spread


def _cpu_per_span(spans: int, capture: bool) -> float:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.util.types import AnyValue

    from traincard_otel._write.pipeline.genai import GenAISpanProcessor
    from traincard_otel._write.queue import ReportQueue

    provider = TracerProvider()
    if capture:
        meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench")
        provider.add_span_processor(GenAISpanProcessor(ReportQueue(spans + 1), meter))
    tracer = provider.get_tracer("bench.agent")
    attributes: dict[str, AnyValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "model-a",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 80,
    }
    start = time.thread_time()
    for _ in range(spans):
        with tracer.start_as_current_span("chat model-a", attributes=attributes):
            pass
    return (time.thread_time() - start) / spans


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Thread CPU per span with the processor and without, and the difference."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    spans, rounds = (2000, 2) if args.quick else (args.spans, args.rounds)
    times = interleave(
        {"with genai": lambda: _cpu_per_span(spans, True), "without": lambda: _cpu_per_span(spans, False)},
        rounds,
    )
    rows = [
        {"case": name, "µs per span": spread([1e6 * t for t in values])["median"], "rounds": len(values)}
        for name, values in times.items()
    ]
    on, off = (statistics.median(times[k]) for k in ("with genai", "without"))
    rows.append({"case": "added", "µs per span": 1e6 * (on - off), "rounds": rounds})
    return report("bench_genai_spans", rows, None, args.json, spans=spans)


if __name__ == "__main__":
    main()
