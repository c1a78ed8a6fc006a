"""Memory at a CUDA out-of-memory error, below the GPU: a snapshot in PyTorch's documented format
(``torch.cuda.memory._snapshot()``: segments of blocks with their frames, device traces) summarised
as the failure's verdict shows it, the observer saving it into the store, and the verdict naming
the largest live allocations. The real allocator's snapshot is tested in ``make gpu-check``
(``tests/integration/test_gpu_anatomy.py``)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from traincard_otel._analysis.memory import evidence, oom_summary, where
from traincard_otel._write.telemetry.memory_history import MemoryHistory
from traincard_otel.testing import MemoryBackend, capture

GiB = 1 << 30
MiB = 1 << 20


def _frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


TORCH_FRAMES = [_frame("/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward")]


def snapshot() -> dict[str, Any]:
    """Two segments: the activations of train.py's forward (2 GiB, 512 MiB), the weights (1 GiB,
    made in model.py), a freed block, and a trace whose last entry is the failed allocation."""
    return {
        "segments": [
            {
                "device": 0,
                "address": 0,
                "total_size": 3 * GiB,
                "stream": 0,
                "segment_type": "large",
                "allocated_size": 3 * GiB,
                "active_size": 3 * GiB,
                "blocks": [
                    {
                        "size": 2 * GiB,
                        "requested_size": 2 * GiB - 512,
                        "address": 0,
                        "state": "active_allocated",
                        "frames": [
                            *TORCH_FRAMES,
                            _frame("/home/me/train.py", 41, "forward"),
                            _frame("/home/me/train.py", 88, "main"),
                        ],
                    },
                    {
                        "size": GiB,
                        "requested_size": GiB,
                        "address": 2 * GiB,
                        "state": "active_allocated",
                        "frames": [_frame("/home/me/model.py", 12, "__init__")],
                    },
                ],
            },
            {
                "device": 0,
                "address": 4 * GiB,
                "total_size": GiB,
                "stream": 0,
                "segment_type": "large",
                "allocated_size": 512 * MiB,
                "active_size": 512 * MiB,
                "blocks": [
                    {
                        "size": 512 * MiB,
                        "requested_size": 512 * MiB,
                        "address": 4 * GiB,
                        "state": "active_allocated",
                        "frames": [*TORCH_FRAMES, _frame("/home/me/train.py", 44, "forward")],
                    },
                    {
                        "size": 512 * MiB,
                        "requested_size": 0,
                        "address": 4 * GiB + 512 * MiB,
                        "state": "inactive",
                        "frames": [],
                    },
                ],
            },
        ],
        "device_traces": [
            [
                {"action": "alloc", "addr": 0, "size": GiB, "stream": 0, "frames": []},
                {"action": "alloc", "addr": 1, "size": 3 * GiB, "stream": 0, "frames": []},  # a peak of 4 GiB
                {"action": "free_completed", "addr": 1, "size": 3 * GiB, "stream": 0, "frames": []},
                {"action": "alloc", "addr": 2, "size": 2 * GiB, "stream": 0, "frames": []},
                {"action": "alloc", "addr": 3, "size": 512 * MiB, "stream": 0, "frames": []},
                {
                    "action": "oom",
                    "addr": 0,
                    "size": 8 * GiB,
                    "stream": 0,
                    "device_free": 100 * MiB,
                    "frames": [],
                },
            ]
        ],
    }


def test_the_summary_names_the_largest_live_allocations_where_the_code_made_them() -> None:
    s = oom_summary(snapshot())
    assert [b["size"] for b in s["largest"]] == [2 * GiB, GiB, 512 * MiB]  # the freed block is not live
    assert [b["where"] for b in s["largest"]] == [
        "/home/me/train.py:41 in forward",  # past PyTorch's own frame
        "/home/me/model.py:12 in __init__",
        "/home/me/train.py:44 in forward",
    ]
    assert s["largest"][0]["frames"][0]["file"].endswith("torch/nn/modules/linear.py")
    assert s["allocated"] == 3 * GiB + 512 * MiB and s["reserved"] == 4 * GiB and s["live_blocks"] == 3
    assert s["peak"] == 4 * GiB  # walked through the trace
    assert oom_summary(snapshot(), peak_bytes=5 * GiB)["peak"] == 5 * GiB  # the allocator's own count wins
    assert (s["failed_alloc"], s["device_free"]) == (8 * GiB, 100 * MiB)
    assert evidence(s) == [
        "allocating 8 GiB failed with 100 MiB free on the device",
        "at the OOM 3.5 GiB allocated, 4 GiB reserved, peak 4 GiB",
        "live 2 GiB allocated at /home/me/train.py:41 in forward",
        "live 1 GiB allocated at /home/me/model.py:12 in __init__",
        "live 512 MiB allocated at /home/me/train.py:44 in forward",
    ]
    assert where([]) == "" and oom_summary({})["largest"] == []


def test_the_observer_saves_the_snapshot_into_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocator's observer, called as PyTorch calls it; the real CUDA calls answered by a small
    stand-in (no GPU here)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", snapshot)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 5 * GiB)
    store, events = MemoryBackend(), []
    history = MemoryHistory(store, rank=3, attempt=1, emit=lambda *e: events.append(e), step=lambda: 17)
    history._observe(0, 8 * GiB, 8 * GiB, 100 * MiB)
    history._observe(0, 8 * GiB, 8 * GiB, 100 * MiB)  # a second OOM: the first one is kept
    assert history.at_oom is not None and history.at_oom["peak"] == 5 * GiB
    [name] = store.files("memory/*")
    assert (
        name.startswith("memory/a1-r3-") and name.endswith(".pickle") and history.at_oom["snapshot"] == name
    )
    assert pickle.loads(store.read_many([name])[name]) == snapshot()
    [(event, attrs, body)] = events
    assert event == "traincard.memory.oom_snapshot" and attrs["traincard.memory.snapshot"] == name
    assert attrs["traincard.step"] == 17 and body["largest"][0]["where"] == "/home/me/train.py:41 in forward"


def test_the_likely_oom_verdict_shows_the_snapshot_and_says_why_nothing_was_recorded_on_a_cpu() -> None:
    torch = pytest.importorskip("torch")
    with capture(memory_history=True) as cap:
        memory = cap.pipeline.memory
        assert memory is not None
        if torch.cuda.is_available():
            pytest.skip("a CUDA machine records for real (tests/integration/test_gpu_anatomy.py)")
        assert cap.status()["notes"] == ["memory_history: no CUDA device, nothing to record"]
        memory.at_oom = oom_summary(snapshot())  # what the observer keeps at an OOM
        cap.reporter.failure(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB"))
        cap.drain()
        verdict = cap.status()["failure"]["verdict"]
    assert verdict["kind"] == "cuda_oom" and verdict["memory"]["largest"][0]["size"] == 2 * GiB
    assert "live 2 GiB allocated at /home/me/train.py:41 in forward" in verdict["evidence"]
    assert "allocating 8 GiB failed with 100 MiB free on the device" in verdict["evidence"]


def test_without_the_setting_an_oom_verdict_has_no_snapshot() -> None:
    torch = pytest.importorskip("torch")
    with capture() as cap:
        assert cap.pipeline.memory is None
        cap.reporter.failure(torch.cuda.OutOfMemoryError("CUDA out of memory"))
        cap.drain()
        verdict = cap.status()["failure"]["verdict"]
    assert verdict["kind"] == "cuda_oom" and "memory" not in verdict
