"""The step anatomy below the adapters: the part clock, the store's columns (segments and parts),
the bounded sample the reader keeps, the analysis (the straggler) and the card's section."""

from __future__ import annotations

import math
import time
from array import array
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._analysis.anatomy import step_anatomy
from traincard_otel._data.anatomy import KEEP, StepParts
from traincard_otel._data.rundata import RunData
from traincard_otel._read.load.parts import add_other_rows
from traincard_otel._read.load.reader import read_store
from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.queue import PartClock
from traincard_otel._write.store.compaction import to_parquet

NAN = math.nan


def test_the_clock_times_each_part_and_the_data_wait_before_the_first_forward() -> None:
    clock = PartClock((True, True, True, True, False))
    start = time.perf_counter()
    time.sleep(0.01)
    for _ in range(2):  # two micro-batches: their forwards and backwards add up
        clock.begin_forward()
        time.sleep(0.005)
        clock.end_forward()
        clock.begin_backward()
        time.sleep(0.003)
        clock.end_backward()
        time.sleep(0.002)  # the wait for the gradients' collectives
        clock.end_communication()
    clock.begin_optimizer()
    clock.end_optimizer()
    data, forward, backward, optimizer, communication = clock.take(start)
    assert 0.01 <= data < 1 and 0.01 <= forward < 1 and 0.006 <= backward < 1  # (a busy machine sleeps long)
    assert 0 <= optimizer < 1 and math.isnan(communication)  # not measured: NaN
    data, forward, backward, optimizer, _ = clock.take(time.perf_counter(), data_wait=0.25)
    assert (data, forward, backward, optimizer) == (0.25, 0.0, 0.0, 0.0)  # a fresh step
    assert math.isnan(clock.take(time.perf_counter())[0])  # no forward yet: the data wait unknown


def test_an_end_without_a_start_adds_nothing() -> None:
    clock = PartClock()
    clock.end_forward()
    clock.end_backward()
    clock.end_communication()
    clock.end_optimizer()
    assert clock.take(time.perf_counter())[1:] == (0.0, 0.0, 0.0, 0.0)


def test_a_step_run_keeps_its_parts_through_a_segment_file() -> None:
    run = segment.step_run(
        [1, 2], [10.0, 11.0], [0.5, 0.6], [NAN, NAN], [0, 0], [0, 0], [0.1, 0.2, 0.1, 0.05, NAN] * 2
    )
    [cols], corrupt = segment.decode(segment.encode([run]), columns_kept=True)
    assert not corrupt and cols["a"][:5].tolist()[:4] == [0.1, 0.2, 0.1, 0.05] and len(cols["a"]) == 10
    rows, _ = segment.decode(segment.encode([run]))
    assert rows[1]["a"][:4] == [0.1, 0.2, 0.1, 0.05] and math.isnan(rows[1]["a"][4])
    with pytest.raises(ValueError, match="parts"):
        segment.step_run([1], [10.0], [0.5], [NAN], [0], [0], [0.1, 0.2])


def test_parts_read_the_anatomy_the_segments_hold(tmp_path: Path) -> None:
    with_parts = segment.step_run(
        [1, 2], [10.0, 11.0], [0.5, 0.6], [NAN] * 2, [0, 0], [0, 0], [0.1, 0.2, 0.1, 0.05, 0.0] * 2
    )
    without = segment.step_run([3], [12.0], [0.7], [NAN], [0], [0])
    records = [with_parts, without]
    backend = LocalBackend(tmp_path / "segments")
    backend.write("a0/r0/w/seg-00000001.jsonl", segment.encode(records))
    from_segments = read_store(backend).anatomy[0]
    import io

    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(to_parquet([(1, records)])))
    data = RunData(source="part")
    add_other_rows(data, table, attempt=0, rank=0)
    from_part = data.anatomy[0]
    assert from_part.steps == from_segments.steps == [1, 2]  # a step without parts has no anatomy
    assert [from_part.row(i) for i in range(2)] == [from_segments.row(i) for i in range(2)]
    assert from_part.row(1) == pytest.approx(
        {"data": 0.1, "forward": 0.2, "backward": 0.1, "optimizer": 0.05, "communication": 0.0, "other": 0.15}
    )


def _without_anatomy_columns(part: bytes) -> bytes:
    """``part`` as a writer before the anatomy wrote it: the same row groups, no ``a_*`` columns."""
    import io

    import pyarrow.parquet as pq

    f = pq.ParquetFile(io.BytesIO(part))
    keep = [n for n in f.schema_arrow.names if not n.startswith("a_")]
    groups = [f.read_row_group(i, keep) for i in range(f.metadata.num_row_groups)]
    out = io.BytesIO()
    with pq.ParquetWriter(out, groups[0].schema.with_metadata(f.schema_arrow.metadata)) as writer:
        for group in groups:
            writer.write_table(
                group.replace_schema_metadata(f.schema_arrow.metadata), row_group_size=len(group)
            )
    return out.getvalue()


def test_parts_keep_the_anatomy_in_their_step_row_groups_through_a_merge(tmp_path: Path) -> None:
    from traincard_otel._store import layout
    from traincard_otel._store.part_format import read_columns
    from traincard_otel._write.store.merge import merge_parts

    def steps(first: int, parts: list[float] | None) -> list[segment.Record]:
        s = [first, first + 1]
        return [segment.step_run(s, [10.0 + x for x in s], [0.5] * 2, [NAN] * 2, [0] * 2, [0] * 2, parts)]

    timed = to_parquet([(1, steps(1, [0.1, 0.2, 0.1, 0.05, NAN] * 2))])
    untimed = to_parquet([(2, steps(3, None))])  # a part of steps without their anatomy
    _names, _metrics, step_rows, _rest = read_columns(timed, seq=False)
    assert step_rows is not None and step_rows["a_forward"].to_pylist() == [0.2, 0.2]
    assert step_rows["a_communication"].null_count == 2  # not measured: null, not NaN
    older = _without_anatomy_columns(to_parquet([(3, steps(5, None))]))
    backend = LocalBackend(tmp_path)
    backend.write(layout.part_name(0, 0, "w", 1, 2), merge_parts([timed, untimed]))
    backend.write(layout.part_name(0, 0, "w", 3, 3), older)
    backend.write(
        layout.part_name(0, 0, "w", 4, 4), to_parquet([(4, steps(7, [0.0, 0.3, 0.1, 0.05, 0.01] * 2))])
    )
    run = read_store(backend)
    assert run.step_times[0].steps == list(range(1, 9))
    anatomy = run.anatomy[0]
    assert anatomy.steps == [1, 2, 7, 8]  # the steps without their anatomy have none
    assert anatomy.row(0) == pytest.approx(
        {
            "data": 0.1,
            "forward": 0.2,
            "backward": 0.1,
            "optimizer": 0.05,
            "communication": NAN,
            "other": 0.05,
        },
        nan_ok=True,
    )
    assert anatomy.row(3)["communication"] == pytest.approx(0.01)


def test_a_long_run_keeps_a_bounded_sample_ending_with_every_recent_step() -> None:
    parts = StepParts()
    n = 10 * KEEP
    for lo in range(1, n + 1, 1000):
        steps = list(range(lo, lo + 1000))
        parts.add(steps, [float(s) for s in steps], [0.01] * 1000, array("d", [0.001] * 5000), 0)
    assert len(parts) <= 2 * KEEP and parts.seen == n
    assert parts.steps[-KEEP:] == list(range(n - KEEP + 1, n + 1))
    assert parts.steps[0] == 1 and parts.steps == sorted(parts.steps)


def test_stored_junk_is_no_part() -> None:
    parts = StepParts()
    parts.add(
        [1, "x", 3, 4],
        [1.0] * 4,
        [0.1, 0.1, -1.0, 0.1],
        ["a", 0.1, 0.1, 0.1, 0.1] + [0.1] * 10 + [NAN] * 5,
        0,
    )
    assert parts.steps == [1]  # "x" is no step, -1 no duration, and step 4 measured nothing
    assert math.isnan(parts.parts[0][0]) and parts.measured() == (False, True, True, True, True)


def _gang(slow_rank: int, ranks: int = 4, steps: int = 20) -> RunData:
    """A synchronous gang: every rank's step is 100 ms; the slow rank's forward is 60 ms, the
    others' 10 ms, and they wait the difference in communication."""
    data = RunData(source="gang")
    for rank in range(ranks):
        forward, wait = (0.06, 0.001) if rank == slow_rank else (0.01, 0.051)
        row = [0.005, forward, 0.02, 0.005, wait]
        data.anatomy[rank] = StepParts()
        data.anatomy[rank].add(
            list(range(1, steps + 1)), [float(s) for s in range(steps)], [0.1] * steps, row * steps, 0
        )
    return data


def test_the_straggler_is_the_rank_that_waits_least_and_its_slow_part_is_named() -> None:
    found = step_anatomy(_gang(slow_rank=2))
    assert found is not None and found.slowest == 2 and found.median in (0, 1, 3)
    straggler = found.straggler
    assert (
        straggler is not None
        and straggler.rank == 2
        and straggler.part == "forward"
        and straggler.others_wait
    )
    assert straggler.text.startswith("rank 2 is the straggler: forward 60 ms vs 10 ms on the median rank")
    assert straggler.text.endswith("; the other ranks wait in communication")
    assert all(r.step_s == pytest.approx(0.1) for r in found.ranks)  # step times alone could not tell


def test_ranks_that_work_alike_have_no_straggler() -> None:
    data = _gang(slow_rank=-1)
    found = step_anatomy(data)
    assert found is not None and found.straggler is None and len(found.ranks) == 4
    assert step_anatomy(RunData(source="none")) is None


def test_the_card_shows_the_slowest_beside_the_median_rank_and_says_what_was_not_measured() -> None:
    from traincard_otel._read.payload import build_payload

    data = _gang(slow_rank=1)
    data.anatomy[0].parts[0] = [NAN] * len(data.anatomy[0])  # rank 0 could not time its data wait
    section = build_payload(data)["anatomy"]
    assert section is not None and section["ranks_timed"] == 4
    assert [(r["rank"], r["role"]) for r in section["ranks"]] == [(1, "slowest"), (2, "median")]
    shares = {p["part"]: p["share"] for p in section["ranks"][0]["parts"]}
    assert max(shares, key=lambda p: shares[p]) == "forward" and sum(shares.values()) == pytest.approx(1)
    assert section["straggler"] is not None and "rank 1 is the straggler: forward" in section["straggler"]
    assert [s["rank"] for s in section["series"]] == [1, 2] and len(section["series"][0]["x"]) == 20
    assert section["notes"] == []  # neither rank shown lacks a part
    single = RunData(source="one")
    single.anatomy[0] = data.anatomy[0]
    one = build_payload(single, live=True)["anatomy"]
    assert one is not None and one["ranks"][0]["role"] == "" and one["ranks"][0]["unmeasured"] == ["data"]
    assert one["notes"][0].startswith("data: not measured")


def test_the_gang_headline_names_the_straggler_and_its_part(store_dir: Path) -> None:
    from traincard_otel._read.payload import build_payload

    data = _gang(slow_rank=3)
    data.states = [{"rank": r, "attempt": 0, "status": "running", "step": 20} for r in range(4)]
    gang = build_payload(data)["gang"]
    assert gang is not None
    lines = [b["text"] for b in gang["headline"]]
    assert any(t.startswith("Rank 3 is the straggler: forward 60 ms vs 10 ms") for t in lines), lines
    assert gang["stragglers"]["anatomy"]["rank"] == 3


def test_load_gives_the_anatomy_as_rows_a_table_and_a_frame(store_dir: Path) -> None:
    reporter = traincard_otel.configure()
    for step in range(1, 4):
        reporter.step_end(step, duration_s=0.1, parts=(0.01, 0.02, 0.03, 0.01, NAN))
    traincard_otel.shutdown()
    run = traincard_otel.load(store_dir)
    rows = run.to_rows("anatomy")
    assert rows[:2] == [
        {"rank": 0, "step": 1, "part": "data", "seconds": 0.01},
        {"rank": 0, "step": 1, "part": "forward", "seconds": 0.02},
    ]
    assert [r["part"] for r in rows if r["step"] == 3] == [
        "data",
        "forward",
        "backward",
        "optimizer",
        "other",
    ]
    assert run.to_arrow("anatomy").num_rows == len(rows) == 15
    frame = run.to_pandas("anatomy")
    assert list(frame.columns) == ["rank", "step", "part", "seconds"]
    assert frame[frame.part == "other"].seconds.tolist() == pytest.approx([0.03] * 3)


def test_the_part_histogram_records_each_measured_part_and_the_rest() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from traincard_otel._schema import Attr, Metric
    from traincard_otel._write.convert.instruments import ConverterInstruments
    from traincard_otel._write.queue import ReportQueue

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    instruments = ConverterInstruments(
        meter,
        ReportQueue(),
        last_metrics=dict,
        step_ends=lambda: 0,
        rejected=dict,
        checkpoint_size=lambda: None,
        throughput=lambda field: None,
    )
    instruments.record_parts([0.1, 0.2], [0.01, 0.02, 0.03, 0.01, NAN, 0.02, 0.04, 0.06, 0.02, NAN])
    data = reader.get_metrics_data()
    assert data is not None
    [metric] = [
        m
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == Metric.STEP_PART_DURATION.name
    ]
    sums = {p.attributes[Attr.STEP_PART]: (p.count, p.sum) for p in metric.data.data_points}
    assert set(sums) == {"data", "forward", "backward", "optimizer", "other"}  # communication: not measured
    assert sums["forward"] == (2, pytest.approx(0.06)) and sums["other"] == (2, pytest.approx(0.03 + 0.06))


def test_a_big_gangs_live_payload_with_anatomy_and_profiles_stays_small() -> None:
    import json

    from traincard_otel._read.payload import LIVE_MAX_BYTES, build_payload

    data = _gang(slow_rank=5, ranks=64, steps=400)
    data.states = [{"rank": r, "attempt": 0, "status": "running", "step": 400} for r in range(64)]
    ops = [
        {"name": f"aten::op_{i}_" + "x" * 40, "calls": 3, "self_cpu_ms": 1.0, "self_device_ms": 0.0}
        for i in range(15)
    ]
    summary = {
        "operators": {"host": ops, "host_total_ms": 15.0},
        "breakdown": {"device": False, "span_s": 1.0, "shares": {"computation": 0.5, "other": 0.5}},
        "cost": {"start_s": 0.01, "stop_s": 0.1},
        "steps": [10, 14],
        "trace": "profiles/p/r0.trace.json.gz",
        "trace_location": "s3://bucket/" + "p" * 100,
    }
    data.profiles = [
        {
            "id": f"p{i}",
            "trigger": "request",
            "asked_at": float(i),
            "steps": [10, 14],
            "ranks": dict.fromkeys(range(64), summary),
        }
        for i in range(30)
    ]
    live = build_payload(data, live=True)
    assert len(json.dumps(live)) <= LIVE_MAX_BYTES
    assert live["anatomy"] is not None and live["profiles"] is not None and live["profiles"]["total"] == 30
    full = build_payload(data, final=True)["profiles"]
    assert full is not None and len(full["captures"]) == 20 and len(full["captures"][0]["ranks"]) == 8


def test_a_backward_reached_through_two_outputs_starts_once_and_nothing_stays_open() -> None:
    clock = PartClock()
    clock.begin_backward()  # the first output backward reaches
    time.sleep(0.02)
    clock.begin_backward()  # the second: backward began already
    clock.end_backward()
    clock.end_backward()  # its second graph callback: nothing more
    clock.end_communication()
    clock.end_communication()
    assert clock.take(time.perf_counter())[2] >= 0.02
    clock.begin_forward()
    clock.begin_backward()  # a step whose backward never finished (an exception) ...
    clock.take(time.perf_counter())
    assert clock.forward_at == clock.backward_at == 0.0  # ... leaves nothing open for the next


def test_a_window_summarised_column_at_a_time_is_the_step_by_step_anatomy() -> None:
    """``window_anatomy`` (columns, as the converter summarises its recent steps for the state and
    ``rank_anatomy`` its window) against the medians taken from each step's row by name."""
    import random
    import statistics

    from traincard_otel._analysis.anatomy import rank_anatomy

    rng = random.Random(7)
    for trial in range(60):
        measured = [rng.random() < 0.7 for _ in range(5)]
        parts, n = StepParts(), rng.randint(1, 60)
        rows = []
        for _ in range(n):
            row = [rng.uniform(0, 0.004) if m and rng.random() < 0.9 else NAN for m in measured]
            if all(v != v for v in row):
                row[measured.index(True) if any(measured) else 0] = 0.001
            rows.append(row)
        durations = [rng.uniform(0.005, 0.02) for _ in range(n)]
        parts.add(list(range(n)), [0.0] * n, durations, [v for r in rows for v in r], 0)
        found = rank_anatomy(0, parts)
        assert found is not None, trial
        window = range(max(0, n - 50), n)
        by_step = [parts.row(i) for i in window]
        for name, got in found.seconds.items():
            values = [r[name] for r in by_step if r[name] == r[name]]
            assert got == pytest.approx(statistics.median(values) if values else 0.0), (trial, name)
        own = [
            parts.durations[i] - (r["communication"] if r["communication"] == r["communication"] else 0.0)
            for i, r in zip(window, by_step, strict=True)
        ]
        assert found.own_s == pytest.approx(statistics.median(own))
        assert found.step_s == pytest.approx(statistics.median(parts.durations[window.start :]))
        assert sum(found.shares.values()) == pytest.approx(1.0)
