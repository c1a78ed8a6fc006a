"""The card payload's section builders: epoch progress, the run-summary table, units, empty-section
reasons, the log panel's bounded selection, the loss counters, and the names card.js reads."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from traincard_otel._read.card.page import card_script
from traincard_otel._read.load.reader import RunData
from traincard_otel._read.payload import build_payload
from traincard_otel._read.payload.status import epoch_progress
from traincard_otel._read.payload.system import readable_note

from tests.support.helpers import HF_BOOKKEEPING, REPO, series
from tests.support.runs import hf_run


def test_epoch_never_exceeds_the_total_and_follows_max_steps() -> None:
    assert epoch_progress(3.75, 3, 150, 150) == (3.75, 3.75)  # HF with max_steps: "3.75 / 3" before
    assert epoch_progress(1.5, 3, 60, 120) == (1.5, 3.0)  # consistent figures are kept as given
    assert epoch_progress(0.5, 3.0, 20, 40) == (0.5, 1.0)  # max_steps stops the run after 1 epoch
    assert epoch_progress(5.0, 3, None, None) == (3.0, 3.0)  # no step figures: clamp to the total
    assert epoch_progress(None, 2, 10, 100) == (None, 2.0)
    run = build_payload(hf_run(), final=True)["run"]
    assert (run["epoch"], run["num_epochs"]) == (3.75, 3.75)


def test_hf_bookkeeping_series_go_to_one_summary_table_not_charts() -> None:
    payload = build_payload(hf_run(), final=True)
    chart_ids = [c["id"] for c in payload["charts"]]
    assert chart_ids == ["loss", "learning_rate"]
    loss = next(c for c in payload["charts"] if c["id"] == "loss")
    assert [s["label"] for s in loss["series"]] == ["train", "eval"]  # eval_loss is a curve
    rows = {r["name"]: r for r in payload["summary"]}
    assert set(rows) == {*HF_BOOKKEEPING, "train_loss"}
    assert rows["train_runtime"]["unit"] == "s" and rows["train_runtime"]["count"] == 1
    assert rows["eval_samples_per_second"]["unit"] == "samples/s"
    assert rows["eval_runtime"]["count"] == 3 and rows["eval_runtime"]["min"] == 3.0
    assert rows["total_flos"]["unit"] == "FLOP" and rows["train_loss"]["value"] == 0.9


def test_a_figure_reported_once_beside_curves_is_a_summary_row_and_every_chart_has_a_unit() -> None:
    data = hf_run()
    data.metrics["final_accuracy"] = series("final_accuracy", [150], 0.8)
    data.step_times[0] = series("step_time", list(range(1, 151)), 0.02)
    payload = build_payload(data, final=True)
    assert "final_accuracy" in {r["name"] for r in payload["summary"]}
    assert all(c["unit"] for c in payload["charts"])
    assert {c["id"]: c["unit"] for c in payload["charts"]}["step_time"] == "s"
    # At the start of a run a single point is still a chart: nothing to compare it with yet.
    early = RunData(source="early")
    early.metrics["loss"] = series("loss", [1])
    assert [c["id"] for c in build_payload(early)["charts"]] == ["loss"]


def _loop_run(phase: str, *, timed: bool = False) -> RunData:
    data = RunData(source="loop")
    data.phases = [{"n": f"training.{phase}", "t0": 1000.0, "t1": 1100.0, "rank": 0, "attempt": 0}]
    data.states = [
        {"attempt": 0, "rank": 0, "status": "finished", "step": 100, "progress": {"max_steps": 100}}
    ]
    for name in ("items_per_s", "latency_p50_s", "latency_p99_s", "latency_p90_s", "loss"):
        data.metrics[name] = series(name, list(range(10, 101, 10)))
    if timed:
        data.step_times[0] = series("step_time", list(range(1, 101)), 0.02)
    return data


@pytest.mark.parametrize(
    ("phase", "timed", "kind", "unit", "label"),
    [
        ("eval", False, "evaluation", "item", "eval"),
        ("validation", False, "evaluation", "item", "eval"),
        ("generate", False, "inference", "item", "infer"),
        ("infer", False, "inference", "item", "infer"),
        ("train", False, "training", "step", "train"),
        ("eval", True, "training", "step", "train"),  # timed optimizer steps: training with an eval
    ],
)
def test_the_card_lays_itself_out_for_the_kind_of_loop(
    phase: str, timed: bool, kind: str, unit: str, label: str
) -> None:
    payload = build_payload(_loop_run(phase, timed=timed), final=True)
    assert (payload["run"]["kind"], payload["run"]["unit"]) == (kind, unit)
    charts = {c["id"]: c for c in payload["charts"]}
    assert charts["loss"]["x"] == unit and [s["label"] for s in charts["loss"]["series"]] == [label]
    latency = charts["latency_s"]  # percentiles share one chart, in order, in seconds
    assert [s["label"] for s in latency["series"]] == ["p50", "p90", "p99"]
    assert (latency["title"], latency["unit"]) == ("latency", "s")
    assert charts["items_per_s"]["unit"] == "items/s" and charts["items_per_s"]["title"] == "items_per_s"


def test_empty_sections_say_why_in_words() -> None:
    note = "No GPU figures: NVML could not start (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    assert readable_note(note) == "No GPU figures: NVML could not start (no NVIDIA driver found)"
    data = RunData(source="cpu only")
    data.states = [{"attempt": 0, "rank": 0, "status": "running", "notes": [note]}]
    payload = build_payload(data)
    assert payload["system"]["notes"] == ["No GPU figures: NVML could not start (no NVIDIA driver found)"]
    assert "no NVIDIA driver found" in payload["empty"]["system"]
    assert "NVMLError" not in repr(payload)
    assert "not reported" in payload["empty"]["training"]


def _logs(n: int, *, ranks: int = 1) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        level = "ERROR" if i % 50_000 == 7 else "WARNING" if i % 25_000 == 3 else "INFO"
        attrs: dict[str, Any] = {"traincard.rank": i % ranks} if ranks > 1 else {}
        if i % 2:
            attrs["log.iostream"] = "stderr"
        out.append({"time": float(i), "level": level, "message": f"line {i}", "rank": 0, "attributes": attrs})
    return out


def test_log_panel_keeps_the_tail_and_early_warnings_and_counts_the_rest() -> None:
    data = RunData(source="chatty")
    data.logs = _logs(200_000, ranks=4)
    payload = build_payload(data, final=True)
    lines, info = payload["logs"], payload["log_info"]
    assert 300 <= len(lines) <= 300 + 200
    assert lines[-1]["message"] == "line 199999" and [r["time"] for r in lines] == sorted(
        r["time"] for r in lines
    )
    assert "line 7" in {r["message"] for r in lines}  # an early error survives the trim
    assert "line 3" in {r["message"] for r in lines}  # and an early warning
    assert info == {
        "total": 200_000,
        "shown": len(lines),
        "trimmed": 200_000 - len(lines),
        "tail": 300,
        "ranks": [0, 1, 2, 3],
    }
    assert {r["rank"] for r in lines} == {0, 1, 2, 3}  # from traincard.rank, not the writer's rank
    assert {r.get("stream") for r in lines} == {None, "stderr"}
    live = build_payload(data, live=True)
    assert len(live["logs"]) <= 80 + 10 + 10 and live["log_info"]["total"] == 200_000


def test_printed_tracebacks_collapse_like_logged_ones() -> None:
    data = RunData(source="tb")
    message = 'step failed\nTraceback (most recent call last):\n  File "x.py", line 1\nValueError: boom'
    data.logs = [{"time": 1.0, "level": "ERROR", "message": message, "rank": 0}]
    line = build_payload(data)["logs"][0]
    assert line["message"] == "step failed"
    assert line["traceback"].startswith("Traceback (most recent call last):")
    assert line["traceback"].endswith("ValueError: boom")


def test_loss_counters_are_read_defensively_and_shown_in_one_place() -> None:
    now = time.time()
    data = RunData(source="lossy")
    data.stats = {"dropped": {"buffer_full": 4}}
    data.states = [
        {
            "attempt": 0,
            "rank": 0,
            "status": "running",
            "rejected": {"not_a_number:x": 3, "name_too_long": 1},
            "store_health": {
                "write_errors": 2,
                "last_error": "S3 unreachable",
                "last_error_at": now - 5,
                "pending_rows": 1200,
                "retrying": True,
            },
        },
        {
            "attempt": 0,
            "rank": 1,
            "status": "running",
            "rejected": {"not_a_number:x": "junk"},
            "store_health": {
                "write_errors": 1,
                "last_error": "older",
                "last_error_at": now - 50,
                "pending_rows": None,
            },
        },
    ]
    payload = build_payload(data, now=now)
    health = payload["health"]
    assert health["dropped_total"] == 4
    assert health["rejected_total"] == 4 and health["rejected_top"][0] == ["not_a_number:x", 3]
    assert (health["write_errors"], health["last_error"], health["pending_rows"], health["retrying"]) == (
        3,
        "S3 unreachable",
        1200,
        True,
    )
    store = [b for b in payload["banners"] if b["kind"] == "store"]
    assert len(store) == 1 and "S3 unreachable" in store[0]["text"] and "1200 rows" in store[0]["text"]
    # An old error raises no banner; absent fields are not shown at all.
    assert not [b for b in build_payload(data, now=now + 3600)["banners"] if b["kind"] == "store"]
    bare = RunData(source="bare")
    bare.states = [{"attempt": 0, "rank": 0, "store_health": "garbage"}]
    assert build_payload(bare)["health"] == {"dropped": {}, "dropped_total": 0}


def test_card_js_keeps_no_copies_of_wire_names() -> None:
    """Banner kinds, levels, verdicts and metric names reach the page only through payload.names."""
    js = card_script()
    payload = build_payload(RunData(source="names"))
    names = payload["names"]
    wire = [b["kind"] for b in names["banners"]] + list(names["levels"]) + list(names["verdicts"])
    wire += names["ratio_metrics"] + names["byte_metrics"] + list(names["series_colors"])
    for name in wire:
        assert not re.search(r"[\"'/]" + re.escape(name) + r"[\"'\\\\/ ]", js), name
    assert "traincard." not in js
    code = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", js, flags=re.S))  # comments may cite names
    assert not re.search(r"[\"'](?:system|process|hw)\.[a-z_.]+", code)  # no metric names either
    assert set(names["sections"]) >= {"run", "banners", "logs", "log_info", "summary", "health", "empty"}


@pytest.mark.parametrize("live", [False, True])
def test_every_payload_key_is_documented(live: bool) -> None:
    doc = (REPO / "docs" / "card-payload.md").read_text(encoding="utf-8")
    for key in build_payload(hf_run(), live=live):
        assert f'"{key}"' in doc, key


def test_a_full_disk_shows_in_the_footer_counters_and_a_banner(tmp_path: Path) -> None:
    """The real store writer on a disk that fills up, then has room again: the card counts it."""
    import errno
    import os

    from traincard_otel import load
    from traincard_otel._store import segment
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._write.store.writer import StoreWriter

    class FullDisk(LocalBackend):
        space = False

        def write(self, name: str, data: bytes) -> None:
            if not self.space:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
            super().write(name, data)

    backend = FullDisk(tmp_path)
    writer = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=60)
    writer.set_state({"status": "running", "started_at": time.time()})
    for step in range(1, 31):
        writer.add(segment.metric_run("train", ["loss"], [step], [time.time()], [1.0 / step]))
        if step % 10 == 0:
            assert writer.flush_now() is False
    backend.space = True
    assert writer.flush_now() is True
    payload = build_payload(load(tmp_path))
    health = payload["health"]
    assert health["write_errors"] == 3 and health["pending_rows"] == 0 and health["retrying"] is False
    assert health["last_error"].startswith("OSError: [Errno 28] No space left on device")
    (banner,) = [b for b in payload["banners"] if b["kind"] == "store"]
    assert banner["text"].startswith("3 store write error(s); last: OSError: [Errno 28]")
