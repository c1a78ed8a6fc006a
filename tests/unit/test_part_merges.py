"""Tiered compaction: parts merged into bigger ones keep every point, step end and line, in order,
across resumes and stores of earlier formats, and a store's objects stay bounded."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._read.load.columns import Shared
from traincard_otel._read.load.reader import StoreReader
from traincard_otel._store import layout, segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.compaction import to_parquet
from traincard_otel._write.store.merge import Part, Tiers, merge_parts
from traincard_otel._write.store.writer import StoreWriter

pytest.importorskip("pyarrow")

NAMES = ["loss", "lr"]


def _writer(root: Path, fan_in: int = 2, writer_id: str | None = None) -> StoreWriter:
    w = StoreWriter(LocalBackend(root), attempt=0, rank=0, flush_interval_s=60)
    w.compact_segments, w.merger.tiers = 2, Tiers(fan_in=fan_in)
    if writer_id is not None:
        w.writer_id = writer_id
    return w


def _steps(first: int, last: int, names: list[str] = NAMES) -> list[segment.Record]:
    """Steps ``first..last`` as the pipeline hands them over: a packed run of metric rows, one of
    step ends, and a run of the lines printed meanwhile (one of them ending a traceback)."""
    steps = list(range(first, last + 1))
    n, times = len(steps), [float(s) for s in steps]
    values = [{"loss": 1.0 / s, "lr": 0.1, "grad_norm": 2.0}[name] for s in steps for name in names]
    lines = [f"step {s}" for s in steps]
    return [
        segment.metric_run("train", names, steps, times, values),
        segment.step_run(steps, times, [0.01] * n, [math.nan] * n, [8] * n, [0] * n),
        segment.line_run(times, ["INFO"] * n, lines, {"traincard.rank": "0"}, {n - 1: "Traceback ...\nE"}),
    ]


def _flush(w: StoreWriter, first: int, last: int, names: list[str] = NAMES) -> None:
    w.add_many(_steps(first, last, names))
    assert w.flush_now()
    assert w.merger.wait(10.0)  # (merges run on a thread of their own)


def _objects(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file())


def test_parts_merge_tier_by_tier_and_read_every_point_line_and_step_end_in_order(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    for i in range(16):  # 16 segments: 8 parts of two, merged in pairs, the pairs in pairs ...
        _flush(w, 10 * i + 1, 10 * i + 10)
    assert w.parts_written == 8 and w.merger.merged >= 4
    parts = [n for n in _objects(tmp_path) if n.endswith(".parquet")]
    assert len(parts) <= 3, parts  # a tier holds at most fan_in - 1 parts, with one merge a flush
    run = traincard_otel.load(tmp_path)
    assert run.stats["corrupt_segments"] == 0
    assert run.metrics["loss"].steps == list(range(1, 161))
    assert run.metrics["loss"].values == [1.0 / s for s in range(1, 161)]
    assert run.step_times[0].steps == list(range(1, 161)) and run.step_times[0].values == [0.01] * 160
    assert run.throughput["samples_per_second{rank=0}"].values == pytest.approx([800.0] * 160)
    assert [r["message"] for r in run.logs] == [f"step {s}" for s in range(1, 161)]
    tracebacks = [r["message"] for r in run.logs if r["traceback"]]
    assert tracebacks == [f"step {10 * i + 10}" for i in range(16)]


def test_a_merge_takes_every_metric_name_of_its_parts(tmp_path: Path) -> None:
    a = to_parquet([(1, _steps(1, 5))])
    b = to_parquet([(2, _steps(6, 10, ["lr", "loss", "grad_norm"]))])  # another order, one more name
    LocalBackend(tmp_path).write(layout.part_name(0, 0, "w1", 1, 2), merge_parts([a, b]))
    run = traincard_otel.load(tmp_path)
    assert run.metrics["loss"].steps == list(range(1, 11))
    assert run.metrics["loss"].values == [1.0 / s for s in range(1, 11)]
    assert (
        run.metrics["grad_norm"].steps == list(range(6, 11)) and run.metrics["grad_norm"].values == [2.0] * 5
    )
    assert len(run.logs) == 10 and run.step_times[0].steps == list(range(1, 11))


def test_a_merge_killed_before_it_deleted_its_parts_reads_the_same(tmp_path: Path) -> None:
    """kill -9 between writing the merged part and deleting the parts it holds: both are listed."""
    backend = LocalBackend(tmp_path)
    parts = [to_parquet([(seq, _steps(10 * seq - 9, 10 * seq))]) for seq in range(1, 5)]
    for seq, data in enumerate(parts, start=1):
        backend.write(layout.part_name(0, 0, "w1", seq, seq), data)
    backend.write(layout.part_name(0, 0, "w1", 1, 4), merge_parts(parts))
    backend.write(layout.segment_name(0, 0, "w1", 5), segment.encode(_steps(41, 50)))
    run = traincard_otel.load(tmp_path)
    assert run.metrics["loss"].steps == list(range(1, 51)) and run.stats["corrupt_segments"] == 0
    assert [r["message"] for r in run.logs] == [f"step {s}" for s in range(1, 51)]


def test_a_live_reader_sees_no_duplicates_or_gaps_while_parts_merge(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    reader = StoreReader(LocalBackend(tmp_path))
    for i in range(12):
        _flush(w, 10 * i + 1, 10 * i + 10)
        data = reader.read()  # every flush, as the live card reads
        assert data.metrics["loss"].steps == list(range(1, 10 * i + 11))
        assert data.step_times[0].steps == list(range(1, 10 * i + 11))
        assert len(data.logs) == 10 * i + 10
    assert w.merger.merged >= 2
    late = StoreReader(LocalBackend(tmp_path)).read()  # a reader starting now reads the merged parts
    assert late.metrics["lr"].steps == list(range(1, 121)) and len(late.logs) == 120


def test_resumed_writers_each_merge_their_own_parts_and_the_run_reads_in_order(tmp_path: Path) -> None:
    # three processes of one run: each resumes 5 steps before where the one before it stopped
    for k, (first, last) in enumerate(((1, 80), (76, 160), (156, 240))):
        w = _writer(tmp_path, writer_id=f"w{k}")
        for lo in range(first, last + 1, 10):
            _flush(w, lo, min(lo + 9, last))
        w.close(5.0)
    run = traincard_otel.load(tmp_path)
    expected = [*range(1, 81), *range(76, 161), *range(156, 241)]
    assert run.metrics["loss"].steps == expected
    assert run.step_times[0].steps == expected
    assert [r["message"] for r in run.logs] == [f"step {s}" for s in expected]
    # closing compacted what was left: each writer holds parts only (and its state)
    assert not [n for n in _objects(tmp_path) if n.startswith("seg-")]


def test_parts_of_earlier_formats_read_beside_merged_ones(tmp_path: Path) -> None:
    data = Path(__file__).parent / "data"
    backend = LocalBackend(tmp_path)
    # steps 1-40 in segments 1-4 (see test_compaction), in parts written before step ends had row
    # groups of their own, and before metric columns, by two processes of the run
    backend.write(layout.part_name(0, 0, "wa", 1, 4), (data / "part-metric-columns.parquet").read_bytes())
    backend.write(layout.part_name(0, 0, "wb", 1, 4), (data / "part-one-row-per-value.parquet").read_bytes())
    w = _writer(tmp_path, writer_id="wc")
    for i in range(4, 12):
        _flush(w, 10 * i + 1, 10 * i + 10)
    run = traincard_otel.load(tmp_path)
    loss = run.metrics["loss"]
    assert loss.steps == [*range(1, 41), *range(1, 41), *range(41, 121)]
    assert run.metrics["lr"].values == [0.1] * 160
    assert run.step_times[0].steps == [*range(1, 41), *range(1, 41), *range(41, 121)]
    assert run.stats["corrupt_segments"] == 0


def test_series_of_one_part_share_their_step_and_time_columns_and_grow_apart(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    for i in range(4):
        _flush(w, 10 * i + 1, 10 * i + 10)
    reader = StoreReader(LocalBackend(tmp_path), share_columns=True)
    data = reader.read()
    loss, lr = data.metrics["loss"], data.metrics["lr"]
    assert loss.steps is lr.steps and type(loss.steps) is Shared and loss.times is lr.times
    with pytest.raises(TypeError, match="shared"):
        loss.steps.append(41)
    w.add_many([segment.metric_run("train", ["loss"], [41], [41.0], [1.0 / 41])])  # loss alone grows
    assert w.flush_now()
    data = reader.read()
    assert data.metrics["loss"].steps == list(range(1, 42)) and data.metrics["lr"].steps == list(range(1, 41))
    live = StoreReader(LocalBackend(tmp_path)).read()  # a reader that grows its series: its own columns
    assert (
        type(live.metrics["loss"].steps) is not Shared
        and live.metrics["loss"].steps is not live.metrics["lr"].steps
    )


def test_a_tier_is_merged_only_from_parts_with_no_segments_between_them() -> None:
    tiers = Tiers(fan_in=2)
    tiers.add(Part(1, 2, 10, 0))
    tiers.add(Part(5, 6, 10, 0))  # segments 3-4 were left out of compaction: never covered
    assert tiers.due() is None
    tiers.add(Part(7, 8, 10, 0))
    taken = tiers.due()
    assert taken == [Part(5, 6, 10, 0), Part(7, 8, 10, 0)]
    assert tiers.merged(taken) == Part(5, 8, 20, 1) and tiers.parts == [Part(5, 8, 20, 1)]
    assert Tiers(fan_in=2, max_rows=15).due() is None
    capped = Tiers(fan_in=2, max_rows=15)
    capped.add(Part(1, 1, 10, 0))
    capped.add(Part(2, 2, 10, 0))
    assert capped.due() is None  # 20 rows: more than a part may hold


class _SlowPartReads(LocalBackend):
    """A store whose reads of parts (a merge's) wait for ``gate``."""

    gate: threading.Event

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        names = list(names)
        if any(name.endswith(".parquet") for name in names):
            self.gate.wait(10.0)
        return super().read_many(names)


def test_segments_are_written_every_flush_while_a_merge_runs(tmp_path: Path) -> None:
    backend = _SlowPartReads(tmp_path)
    backend.gate = threading.Event()
    w = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=60)
    w.compact_segments, w.merger.tiers = 2, Tiers(fan_in=2)
    for i in range(4):  # two parts: a merge starts, and waits
        w.add_many(_steps(10 * i + 1, 10 * i + 10))
        assert w.flush_now()
    assert not w.merger.wait(0.2)
    w.add_many(_steps(41, 50))
    assert w.flush_now()  # not held up by the merge
    assert "seg-00000005.jsonl" in _objects(tmp_path)
    assert traincard_otel.load(tmp_path).metrics["loss"].steps == list(range(1, 51))
    backend.gate.set()
    assert w.merger.wait(10.0) and w.merger.merged == 1
    assert traincard_otel.load(tmp_path).metrics["loss"].steps == list(range(1, 51))
