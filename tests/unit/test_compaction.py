"""Compaction into Parquet parts: readers see one consistent series before, during and after it."""

from __future__ import annotations

import io
import json
import math
from array import array
from collections.abc import Iterable
from pathlib import Path

import pytest

import traincard_otel
from traincard_otel._read.load.reader import StoreReader
from traincard_otel._read.payload import build_payload
from traincard_otel._store import layout, segment
from traincard_otel._store.backends import LocalBackend
from traincard_otel._write.store.compaction import to_parquet
from traincard_otel._write.store.writer import StoreWriter

pytest.importorskip("pyarrow")


def _writer(root: Path, every: int = 4) -> StoreWriter:
    w = StoreWriter(LocalBackend(root), attempt=0, rank=0, flush_interval_s=60)
    w.compact_segments = every
    return w


def _records(first: int, last: int) -> list[segment.Record]:
    """Steps ``first..last`` as the pipeline hands them over: packed runs, with a tagged row and a
    log line after step 7 (splitting the runs there)."""
    records: list[segment.Record] = []
    for steps in (
        [s for s in range(first, last + 1) if s <= 7],
        [s for s in range(first, last + 1) if s > 7],
    ):
        if not steps:
            continue
        n, times = len(steps), [float(s) for s in steps]
        values = [v for s in steps for v in (1.0 / s, 0.1)]
        records.append(segment.metric_run("train", ["loss", "lr"], steps, times, values))
        records.append(segment.step_run(steps, times, [0.01] * n, [math.nan] * n, [8] * n, [64] * n))
        if steps[-1] == 7:
            records.append(segment.metric_run(None, ["gpu"], [7], [7.0], [0.5], {"hw": "gpu0"}))
            records.append({"k": "l", "t": 7.0, "lvl": "WARNING", "msg": "<b>spiky</b>", "a": {}})
            records.append({"k": "m", "t": 7.0, "s": 7, "p": None, "v": {"plain": 1.5}})  # kept whole
    return records


def _flush_steps(w: StoreWriter, first: int, last: int) -> None:
    """:func:`_records` of steps ``first..last``, in one segment."""
    w.add_many(_records(first, last))
    assert w.flush_now()


def test_parts_replace_segments_and_read_the_same(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    for i in range(10):
        _flush_steps(w, 10 * i + 1, 10 * i + 10)
    assert w.parts_written == 2
    names = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert [n for n in names if n.endswith(".parquet")] == [
        "part-00000001-00000004.parquet",
        "part-00000005-00000008.parquet",
    ]
    assert [n for n in names if n.startswith("seg-")] == ["seg-00000009.jsonl", "seg-00000010.jsonl"]
    run = traincard_otel.load(tmp_path)
    assert run.metrics["loss"].steps == list(range(1, 101))
    assert run.metrics["loss"].values == [1.0 / s for s in range(1, 101)]
    assert run.metrics["gpu{hw=gpu0}"].values == [0.5]
    assert run.metrics["plain"].steps == [7] and run.metrics["plain"].values == [1.5]
    assert run.step_times[0].steps == list(range(1, 101))
    assert run.throughput["tokens_per_second{rank=0}"].values[0] == pytest.approx(6400)
    assert [r["message"] for r in run.logs] == ["<b>spiky</b>"]
    assert run.stats["corrupt_segments"] == 0


def test_a_live_reader_sees_no_duplicates_or_gaps_while_compaction_runs(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    reader = StoreReader(LocalBackend(tmp_path))
    _flush_steps(w, 1, 10)
    _flush_steps(w, 11, 20)
    assert reader.read().metrics["loss"].steps == list(range(1, 21))  # read segments 1-2
    _flush_steps(w, 21, 30)
    _flush_steps(w, 31, 40)  # compaction: part 1-4 written, segments 1-4 deleted
    assert w.parts_written == 1 and not list(tmp_path.rglob("seg-00000001.jsonl"))
    _flush_steps(w, 41, 50)
    data = reader.read()
    assert data.metrics["loss"].steps == list(range(1, 51))
    assert data.step_times[0].steps == list(range(1, 51))


def test_a_corrupt_part_is_skipped_and_counted(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    for i in range(4):
        _flush_steps(w, 10 * i + 1, 10 * i + 10)
    part = next(tmp_path.rglob("*.parquet"))
    part.write_bytes(part.read_bytes()[:100])
    run = traincard_otel.load(tmp_path)
    assert run.stats["corrupt_segments"] == 1 and part.name in run.stats["corrupt_names"][0]
    assert "loss" not in run.metrics  # its segments were deleted after the part was written: lost, but said


def test_state_reports_parts(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    for i in range(4):
        _flush_steps(w, 10 * i + 1, 10 * i + 10)
    state = json.loads(next(tmp_path.rglob("state.json")).read_text())
    assert state["parts"] == 1 and state["compaction_note"] is None


def test_a_record_compaction_cannot_encode_turns_compaction_off_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # the runtime policy: log once, training goes on
    w = _writer(tmp_path)
    _flush_steps(w, 1, 10)
    # a step Parquet's int64 column rejects
    w.add(segment.step_run(["eleven"], [11.0], [0.01], [math.nan], [0], [0]))
    assert w.flush_now()
    for i in range(1, 4):
        _flush_steps(w, 10 * i + 2, 10 * i + 11)
    assert w.parts_written == 0 and "compaction is off: " in (w.compaction_note or "")
    state = json.loads(next(tmp_path.rglob("state*.json")).read_text())
    assert state["compaction_note"] == w.compaction_note
    run = StoreReader(LocalBackend(tmp_path)).read()
    banners = [b["text"] for b in build_payload(run)["banners"]]
    assert any(b.startswith("Store compaction is off: ") and "nothing is lost" in b for b in banners), banners
    assert run.metrics["loss"].steps == [*range(1, 11), *range(12, 42)]
    assert run.step_times[0].steps == [*range(1, 11), "eleven", *range(12, 42)]


class _CountingBackend(LocalBackend):
    """A local store that remembers which objects were fetched."""

    fetched: list[str]

    def read_many(self, names: Iterable[str]) -> dict[str, bytes]:
        names = list(names)
        self.fetched += names
        return super().read_many(names)


def test_a_part_of_segments_already_read_is_not_fetched_and_parts_fill_typed_columns(tmp_path: Path) -> None:
    w = _writer(tmp_path)
    backend = _CountingBackend(tmp_path)
    backend.fetched = []
    reader = StoreReader(backend)
    for i in range(4):
        _flush_steps(w, 10 * i + 1, 10 * i + 10)
        reader.read()  # the live card reads every segment before compaction replaces it
    assert w.parts_written == 1
    backend.fetched = []
    data = reader.read()
    assert not [n for n in backend.fetched if n.endswith(".parquet")]
    assert data.metrics["loss"].steps == list(range(1, 41))
    # a new reader reads the parts: every metric series in typed columns, in report order
    for i in range(4, 8):
        _flush_steps(w, 10 * i + 1, 10 * i + 10)
    run = StoreReader(LocalBackend(tmp_path)).read()
    loss = run.metrics["loss"]
    assert isinstance(loss.values, array) and isinstance(loss.steps, array) and isinstance(loss.ranks, array)
    assert loss.steps == list(range(1, 81)) and loss.values == [1.0 / s for s in range(1, 81)]
    assert loss.times == [float(s) for s in range(1, 81)] and loss.attempts == [0] * 80
    assert run.metrics["lr"].values == [0.1] * 80 and run.metrics["gpu{hw=gpu0}"].steps == [7]
    assert run.metrics["plain"].steps == [7]  # a row kept whole, beside its packed neighbours


def test_a_part_of_one_row_per_value_reads_as_before_beside_parts_with_metric_columns(tmp_path: Path) -> None:
    # Written by the part format before metric columns (one row per value, names in a column):
    # the records of _records(1, 40) in segments 1-4.
    legacy = (Path(__file__).parent / "data" / "part-one-row-per-value.parquet").read_bytes()
    backend = LocalBackend(tmp_path)
    backend.write(layout.part_name(0, 0, "w1", 1, 4), legacy)
    backend.write(
        layout.part_name(0, 0, "w1", 5, 8),
        to_parquet([(seq, _records(10 * seq - 9, 10 * seq)) for seq in range(5, 9)]),
    )
    backend.write(layout.segment_name(0, 0, "w1", 9), segment.encode(_records(81, 90)))
    run = traincard_otel.load(tmp_path)
    loss = run.metrics["loss"]
    assert isinstance(loss.values, array) and loss.steps == list(range(1, 91))
    assert loss.values == [1.0 / s for s in range(1, 91)] and loss.attempts == [0] * 90
    assert run.metrics["lr"].values == [0.1] * 90
    assert run.metrics["gpu{hw=gpu0}"].steps == [7] and run.metrics["plain"].values == [1.5]
    assert run.step_times[0].steps == list(range(1, 91))
    assert run.throughput["tokens_per_second{rank=0}"].values == pytest.approx([6400] * 90)
    assert [r["message"] for r in run.logs] == ["<b>spiky</b>"]
    assert run.stats["corrupt_segments"] == 0


def test_a_part_keeps_each_metric_in_a_column_of_its_own(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    data = to_parquet([(1, [*_records(1, 10), segment.metric_run(None, ["eval_loss"], [10], [10.5], [0.7])])])
    table = pq.ParquetFile(io.BytesIO(data)).read()
    names = json.loads(table.schema.metadata[b"traincard_metrics"])
    assert names == ["loss", "lr", "gpu", "eval_loss"]
    assert table.num_rows == 12 + 10 + 2  # metric rows (one per reported step), step ends, kept whole
    eval_loss = table["m3"].to_pylist()
    assert eval_loss[:12] == [None] * 11 + [0.7] and table["m0"].to_pylist()[:3] == [1.0, 0.5, 1.0 / 3]
    LocalBackend(tmp_path).write(layout.part_name(0, 0, "w1", 1, 1), data)
    run = traincard_otel.load(tmp_path)
    assert run.metrics["eval_loss"].steps == [10] and run.metrics["eval_loss"].times == [10.5]
    assert run.metrics["loss"].steps == list(range(1, 11))


def test_a_part_of_no_known_layout_is_skipped_and_counted(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table({"x": pa.array([1, 2], pa.int64())}), out)
    backend = LocalBackend(tmp_path)
    backend.write(layout.part_name(0, 0, "w1", 1, 1), out.getvalue())
    backend.write(layout.segment_name(0, 0, "w1", 2), segment.encode(_records(1, 3)))
    run = traincard_otel.load(tmp_path)
    assert run.stats["corrupt_segments"] == 1 and run.metrics["loss"].steps == [1, 2, 3]


def test_a_part_writes_its_integers_as_deltas_and_its_times_split_by_byte(tmp_path: Path) -> None:
    """The encodings that make a part smaller and quicker to write and read, merged parts too."""
    import pyarrow.parquet as pq

    from traincard_otel._write.store.merge import merge_parts

    first, second = to_parquet([(1, _records(1, 10))]), to_parquet([(2, _records(11, 20))])
    for data in (first, merge_parts([first, second])):
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        group = meta.row_group(0)
        chunks = {group.column(i).path_in_schema: group.column(i) for i in range(meta.num_columns)}
        for name in ("seq", "s", "n", "tok"):
            assert "DELTA_BINARY_PACKED" in chunks[name].encodings, name
        assert "BYTE_STREAM_SPLIT" in chunks["t"].encodings
    LocalBackend(tmp_path).write(layout.part_name(0, 0, "w1", 1, 2), merge_parts([first, second]))
    run = traincard_otel.load(tmp_path)
    assert run.metrics["loss"].steps == list(range(1, 21)) and run.metrics["loss"].values[-1] == 1 / 20
    assert list(run.step_times[0].steps) == list(range(1, 21))
