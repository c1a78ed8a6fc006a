"""Stack dumps: bounded and escaped whatever the code looks like; grouped by stack; the rank stuck
outside a collective named as the first failure, the ranks waiting in one as waiting for it."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from traincard_otel._analysis.gang.first_failure import first_failure, panel_failure
from traincard_otel._analysis.gang.stacks import collective, locate, rank_list, where
from traincard_otel._read.payload.contract import GangSection
from traincard_otel._read.payload.gang import gang_section
from traincard_otel._write.telemetry import stacks

TORCH = "/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py"


def _dump(*frames: tuple[str, int, str], rank: int = 0) -> dict[str, Any]:
    fs = [{"file": f, "line": line, "func": fn} for f, line, fn in frames]
    return {
        "reason": "stall",
        "time": 100.0,
        "rank": rank,
        "threads": [{"name": "MainThread", "main": True, "daemon": False, "depth": len(fs), "frames": fs}],
    }


def _in_all_reduce(rank: int) -> dict[str, Any]:
    return _dump(
        (TORCH, 2800, "all_reduce"),
        (LOGGER, 81, "wrapper"),
        ("/job/train.py", 88, "train_step"),
        ("/job/train.py", 120, "main"),
        rank=rank,
    )


def _in_fetch(rank: int) -> dict[str, Any]:
    return _dump(
        ("/usr/lib/python3.12/threading.py", 355, "wait"),
        ("/job/data.py", 41, "fetch_batch"),
        ("/job/train.py", 110, "main"),
        rank=rank,
    )


def test_collectives_are_recognised_by_their_frames() -> None:
    assert collective(_in_all_reduce(0)["threads"][0]["frames"])["op"] == "all_reduce"
    assert collective(_in_fetch(0)["threads"][0]["frames"]) is None
    for path, func in (
        ("/x/site-packages/torch/distributed/distributed_c10d.py", "monitored_barrier"),
        ("/x/site-packages/torch/nn/parallel/distributed.py", "_sync_buffers"),
        ("/x/site-packages/torch/distributed/fsdp/_runtime_utils.py", "_unshard"),
        ("/x/site-packages/deepspeed/comm/comm.py", "all_reduce"),
        ("/x/site-packages/accelerate/utils/operations.py", "gather"),
        ("/x/site-packages/accelerate/state.py", "wait_for_everyone"),
    ):
        assert collective([{"file": path, "line": 1, "func": func}]) is not None, path
    assert (
        collective([{"file": "/x/site-packages/torch/nn/modules/module.py", "line": 1, "func": "forward"}])
        is None
    )


def test_where_names_the_collective_and_the_call_site_or_the_own_code() -> None:
    assert where(_in_all_reduce(0))["text"] == "waiting in all_reduce at train.py:88"
    assert where(_in_fetch(1))["text"] == "in fetch_batch at data.py:41"  # threading's frame is the library's


def test_ranks_with_the_same_stack_are_grouped_and_the_culprit_comes_first() -> None:
    dumps = {r: _in_all_reduce(r) for r in (0, 2, 3, 4, 5, 6, 7)} | {1: _in_fetch(1)}
    located = locate(dumps)
    assert located is not None
    assert located["culprits"] == [1] and located["waiting"] == [0, 2, 3, 4, 5, 6, 7]
    assert [g["ranks"] for g in located["groups"]] == [[1], [0, 2, 3, 4, 5, 6, 7]]
    assert located["summary"] == (
        "rank 1: in fetch_batch at data.py:41 · ranks 0, 2-7: waiting in all_reduce at train.py:88"
    )


def test_no_culprit_when_every_rank_waits_in_a_collective_or_none_does() -> None:
    assert locate({0: _in_all_reduce(0), 1: _in_all_reduce(1)})["culprits"] == []  # type: ignore[index]
    assert locate({0: _in_fetch(0), 1: _in_fetch(1)})["culprits"] == []  # type: ignore[index]
    assert locate({}) is None


def test_rank_lists() -> None:
    assert rank_list([1]) == "rank 1"
    assert rank_list([0, 1]) == "ranks 0, 1"
    assert rank_list([7, 0, 2, 3, 4, 9]) == "ranks 0, 2-4, 7, 9"


def _row(rank: int, beat: float) -> dict[str, Any]:
    return {
        "rank": rank,
        "node": 0,
        "host": "h",
        "pid": 10 + rank,
        "step": 30,
        "heartbeat_at": beat,
        "status": "running",
        "updated_at": beat + 50,
    }


def test_the_culprit_is_first_even_when_its_heartbeat_is_later() -> None:
    """Rank 0 entered all_reduce at step 30 a moment before rank 1 stopped in fetch_batch: by
    heartbeats alone rank 0 came first, and the card named the victim."""
    rows = [_row(0, 100.0), _row(1, 100.3)]
    hung = [{"rank": r["rank"]} for r in rows]
    assert first_failure(rows, [], {}, hung, 0)["rank"] == 0  # type: ignore[index]  # without stacks
    located = locate({0: _in_all_reduce(0), 1: _in_fetch(1)})
    first = first_failure(rows, [], {}, hung, 0, located=located)
    assert first is not None and first["rank"] == 1 and first["culprit"]
    assert first["how"] == (
        "hung in fetch_batch at data.py:41, not in a collective while rank 0 waits in all_reduce"
    )
    assert [c["how"] for c in first["consequences"]] == ["waiting in all_reduce at train.py:88 for rank 1"]
    assert panel_failure(first, {})["verdict"]["text"].startswith("Hung outside a collective")


def test_a_crash_before_the_hang_stays_the_first_failure() -> None:
    rows = [
        _row(0, 100.0),
        {
            **_row(1, 90.0),
            "status": "failed",
            "failure": {"type": "ValueError", "time": 90.0, "message": "x"},
        },
    ]
    located = locate({0: _in_all_reduce(0)})
    first = first_failure(rows, [], {}, [{"rank": 0}], 0, located=located)
    assert first is not None and first["rank"] == 1


def _section(located: dict[str, Any], world_size: int) -> GangSection:
    """The gang panel of ``world_size`` ranks on one node with nothing known but their stacks."""
    section = gang_section(
        {
            "world_size": world_size,
            "num_nodes": 1,
            "nodes": [],
            "ranks": [],
            "stragglers": {},
            "first_failure": None,
            "hung": [],
            "waiting": [],
            "waits": [],
            "aggregates": {},
            "stacks": located,
        }
    )
    assert section is not None
    return section


def test_a_dump_is_bounded_and_escaped_whatever_the_code_looks_like() -> None:
    hostile = "\udcff" + "/very/long\x1b" * 400 + "\n.py"
    code = compile("def f(n):\n    return f(n - 1) if n else g()\n", hostile, "exec")
    env: dict[str, Any] = {"g": lambda: stacks.capture("stall", 3)}
    exec(code, env)
    env["f"].__code__ = env["f"].__code__.replace(co_name="f\u202e<script>" * 50)
    limit = sys.getrecursionlimit()
    dump = env["f"](min(400, limit - 100))
    text = json.dumps(dump, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate left
    assert len(json.dumps(dump)) <= stacks.MAX_BYTES
    main = next(t for t in dump["threads"] if t["main"])
    assert main["depth"] > 400 and len(main["frames"]) <= stacks.MAX_FRAMES
    names = [f["file"] for f in main["frames"]]
    assert all(len(n) <= stacks.MAX_TEXT and n.isprintable() for n in names)
    assert any("\\udcff" in n for n in names) and any("\\x1b" in n for n in names)
    funcs = [f["func"] for f in main["frames"]]
    assert all(len(n) <= stacks.MAX_TEXT and "\u202e" not in n for n in funcs)
    located = locate({3: dump})
    assert located is not None
    section = _section(located, world_size=1)
    assert section["stacks"] is not None


def test_many_threads_and_deep_stacks_fit_the_byte_budget() -> None:
    stop = threading.Event()

    def deep(n: int) -> None:
        if n:
            deep(n - 1)
        else:
            stop.wait()

    threads = [threading.Thread(target=deep, args=(200,), daemon=True) for _ in range(30)]
    for t in threads:
        t.start()
    try:
        dump = stacks.capture("request", 0, request="abc")
    finally:
        stop.set()
    assert len(json.dumps(dump)) <= stacks.MAX_BYTES
    assert dump["threads"][0]["main"] and dump["threads_total"] >= 31
    assert len(dump["threads"]) <= stacks.MAX_THREADS and dump["request"] == "abc"


def test_the_calling_threads_own_frames_are_left_out() -> None:
    def fetch_batch() -> dict[str, Any]:
        return stacks.capture("sigterm", 0)

    dump = fetch_batch()
    main = next(t for t in dump["threads"] if t["main"])
    assert main["frames"][0]["func"] == "fetch_batch"


def test_the_flight_recorder_is_given_a_bounded_ring_unless_a_size_is_set() -> None:
    from traincard_otel._write.telemetry import collectives

    env: dict[str, str] = {}
    assert collectives.enable(env) and env == {"TORCH_FR_BUFFER_SIZE": "2000"}
    assert not collectives.enable({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"})  # the user's choice, off included


def test_flight_recorder_entries_say_who_has_not_joined() -> None:
    from traincard_otel._analysis.gang.stacks import joined
    from traincard_otel._write.telemetry.collectives import summarise

    def fr(*ops: str) -> dict[str, Any]:
        entries = [
            {
                "collective_seq_id": i + 1,
                "profiling_name": f"nccl:{op}",
                "state": "started",
                "is_p2p": False,
                "process_group": ["0", "default_pg"],
                "input_sizes": [[4]],
            }
            for i, op in enumerate(ops)
        ]
        entries.append(
            {
                "collective_seq_id": 99,
                "profiling_name": "nccl:send",
                "is_p2p": True,
                "process_group": ["0", "default_pg"],
            }
        )
        entries.append(
            {"collective_seq_id": 50, "profiling_name": "nccl:all_gather", "process_group": ["1", "tp_group"]}
        )
        return summarise({"entries": entries})  # type: ignore[return-value]

    ahead, behind = fr("broadcast", "all_reduce", "all_reduce"), fr("broadcast", "all_reduce")
    assert ahead["last"] == {
        "seq": 3,
        "op": "all_reduce",
        "backend": "nccl",
        "state": "started",
        "sizes": [[4]],
    }
    assert summarise({"entries": []}) is None
    dumps = {r: {**_in_all_reduce(r), "collectives": ahead} for r in (0, 2, 3)} | {
        1: {**_in_fetch(1), "collectives": behind}
    }
    recorded = joined(dumps)
    assert recorded is not None and recorded["not_joined"] == [1]
    assert recorded["pending"] == {"seq": 3, "op": "all_reduce"}
    assert (
        recorded["text"]
        == "ranks 0, 2, 3 entered all_reduce #3; rank 1 not yet (last entered: all_reduce #2)"
    )
    assert joined({0: _in_all_reduce(0)}) is None


def test_a_request_in_the_store_is_answered_once_and_a_stale_one_not_at_all(tmp_path: Any) -> None:
    from traincard_otel._store import layout, requests
    from traincard_otel._store.backends import LocalBackend
    from traincard_otel._write.telemetry.stack_watch import StackWatch

    backend = LocalBackend(tmp_path)
    events: list[tuple[str, dict[str, object], object]] = []
    watch = StackWatch(lambda name, attrs, body=None: events.append((name, dict(attrs), body)), 3, "h")

    def check(now: float | None = None) -> None:
        watch.answer(requests.read(backend).get("stacks"), stalled=False, now=now)

    check()  # no request: nothing
    backend.write(layout.REQUESTS, b"not json")
    check()
    requests.ask(backend, "stacks", {"id": "old", "time": 0.0})
    check(now=1000.0)  # asked before this rank could have answered
    assert events == [] and watch.latest is None
    requests.ask(backend, "stacks", {"id": "abc", "time": 1000.0})
    requests.ask(backend, "profile", {"id": "p", "time": 1000.0})  # another kind keeps it
    check(now=1001.0)
    check(now=1004.0)  # the same request: answered once
    assert [(n, a["traincard.stack.request"], a["traincard.stack.reason"]) for n, a, _b in events] == [
        ("traincard.rank.stack", "abc", "request")
    ]
    assert watch.latest is not None and watch.latest["answered"] == "abc" and watch.latest["rank"] == 3
    answered_at = watch.latest["time"]
    watch.forget_answer(answered_at + 30)
    assert watch.latest is not None  # the asker may still be reading
    watch.forget_answer(answered_at + 61)
    assert watch.latest is None  # a healthy rank's state is small again
    assert watch.dump("stall", stalled=True)["answered"] == "abc"  # a later refresh still answers it
    watch.forget_stall()
    assert watch.latest is None


OWN = tuple(f"traincard-{n}" for n in ("console-1-2", "siblings", "watchdog", "store", "schedule"))


def test_the_users_threads_come_first_and_traincards_own_are_apart() -> None:
    dump = _in_fetch(1)
    main = dump["threads"][0]
    worker = {"name": "pin_memory", "main": False, "daemon": True, "depth": 2, "frames": main["frames"][:1]}
    own = [{**worker, "name": name} for name in OWN]
    dump["threads"] = [own[0], worker, *own[1:], main]  # as an older dump ordered them: by thread id
    located = locate({1: dump, 0: _in_all_reduce(0)})
    assert located is not None
    section = _section(located, world_size=2)
    assert section["stacks"] is not None
    group = section["stacks"]["groups"][0]
    assert group["ranks"] == [1]
    assert [t["name"] for t in group["threads"]] == ["MainThread", "pin_memory"]
    assert [t["name"] for t in group["own_threads"]] == list(OWN)
    assert section["stacks"]["groups"][1]["own_threads"] == []


def test_a_dump_keeps_the_users_threads_before_traincards_own() -> None:
    stop = threading.Event()
    started = [
        threading.Thread(target=stop.wait, name=f"{who}-{i}", daemon=True)
        for i in range(5)
        for who in ("traincard-helper", "user-loader")
    ]
    for t in started:
        t.start()
    try:
        names = [t["name"] for t in stacks.capture("request", 0)["threads"]]
    finally:
        stop.set()
    assert names[0] == threading.main_thread().name
    assert {f"user-loader-{i}" for i in range(5)} <= set(names)
    own = [n.startswith("traincard-") for n in names]
    assert own == sorted(own)  # none of the user's after one of traincard's


def test_every_thread_the_package_starts_is_named_as_its_own() -> None:
    import ast
    from pathlib import Path

    import traincard_otel

    unnamed = []
    for path in Path(traincard_otel.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "Thread",
                "ThreadPoolExecutor",
            ):
                named = {k.arg: k.value for k in node.keywords}
                name = named.get("name", named.get("thread_name_prefix"))
                text = ast.unparse(name) if name is not None else ""
                if not text.strip("'\"f").startswith("traincard-"):
                    unnamed.append(f"{path.name}:{node.lineno} {text}")
    assert unnamed == []
