"""Per-item figures of evaluation and inference loops, reported through a real pipeline."""

from __future__ import annotations

import pytest

from traincard_otel._write.report.items import RESERVOIR, ItemMeter, percentile
from traincard_otel.testing import capture


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, q) for q in (50, 90, 99, 100)] == [50.0, 90.0, 99.0, 100.0]
    assert percentile([7.0], 50) == 7.0


def test_every_stretch_of_items_becomes_one_row_in_the_phase() -> None:
    clock = Clock()
    with capture() as cap:
        meter = ItemMeter(cap.reporter, every=10, phase="infer", clock=clock)
        with cap.reporter.phase("infer"):
            for i in range(25):
                clock.t += 0.5  # two items a second
                latency = 0.01 * (i % 10 + 1)
                failed = RuntimeError("bad prompt") if i in (3, 17) else None
                meter.item(
                    latency,
                    tokens=None if failed else 16,
                    ttft_s=None if failed else latency / 4,
                    error=failed,
                )
            summary = meter.close()
        run = cap.load()
    m = run.metrics
    assert m["items_per_s"].steps == [10, 20, 25] and m["items_per_s"].values == [2.0, 2.0, 2.0]
    assert m["latency_p50_s"].values[0] == pytest.approx(0.05) and m["latency_p99_s"].values[
        0
    ] == pytest.approx(0.1)
    assert m["errors"].values == [1.0, 2.0, 2.0] and m["error_rate"].values == [0.1, 0.1, 0.0]
    assert m["tokens_per_s"].values == [
        pytest.approx(9 * 16 / 5),
        pytest.approx(9 * 16 / 5),
        pytest.approx(5 * 16 / 2.5),
    ]
    assert m["ttft_p50_s"].values[0] == pytest.approx(0.06 / 4)  # 5th of 9: item 3 failed
    rows = [r for r in run.to_rows("metrics") if r["metric"] == "items_per_s"]
    assert len(rows) == 3
    assert summary["items"] == 25 and summary["errors"] == 2 and summary["items_per_s"] == pytest.approx(2.0)
    assert summary["tokens_per_s"] == pytest.approx(23 * 16 / 12.5)
    assert [e for e in run.events if e["name"] == "traincard.anomaly"] == []


def test_the_whole_loop_summary_keeps_a_bounded_sample() -> None:
    clock = Clock()

    class Sink:
        rows = 0

        def metrics(self, values: object, step: int | None = None, phase: str | None = None) -> None:
            self.rows += 1

    sink = Sink()
    meter = ItemMeter(sink, every=1000, clock=clock)
    for i in range(3 * RESERVOIR):
        clock.t += 0.001
        meter.item(float(i % 100))
    assert len(meter._sample) == RESERVOIR and sink.rows == 30
    summary = meter.summary()
    assert summary["latency_p50_s"] == pytest.approx(50, abs=3) and summary["latency_p99_s"] >= 95
    with pytest.raises(ValueError, match="every must be at least 1"):
        ItemMeter(sink, every=0)


def test_reporter_meter_reports_in_the_open_phase_and_closes_with_its_block() -> None:
    with capture() as cap:
        with cap.reporter.phase("eval"), cap.reporter.meter(every=4) as meter:
            for _ in range(6):
                meter.item(0.01)
        run = cap.load()
    rows = [r for r in run.to_rows("metrics") if r["metric"] == "items_per_s"]
    assert [r["step"] for r in rows] == [4, 6]  # the block's end reported the last two
    assert meter.phase == "eval"


def test_bad_figures_are_counted_never_raised() -> None:
    clock = Clock()
    with capture() as cap:
        meter = ItemMeter(cap.reporter, every=4, phase="infer", clock=clock)
        for latency, tokens, ttft in (
            (0.1, 8, 0.01),
            ("slow", 8, 0.01),  # not a number
            (float("nan"), None, None),
            (-1.0, 8, 0.01),  # negative
            (0.1, "many", 0.01),
            (0.1, 8, float("inf")),
            (True, 8, 0.01),  # a bool is not a latency
            (0.3, 8, 0.02),
        ):
            clock.t += 1.0
            meter.item(latency, tokens=tokens, ttft_s=ttft)  # type: ignore[arg-type]
        summary = meter.close()
        run = cap.load()
    assert summary["items"] == 8 and summary["bad_values"] == 6
    assert run.metrics["bad_values"].values == [3.0, 6.0]
    assert run.metrics["latency_p50_s"].values == [0.1, 0.1]  # only the finite latencies
    assert run.metrics["items_per_s"].values == [pytest.approx(4 / 4), pytest.approx(4 / 4)]
