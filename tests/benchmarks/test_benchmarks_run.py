"""The benchmark scripts run (tiny configurations) and report what they should; their timings are
not asserted here."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

import benchmarks

REPO = Path(benchmarks.__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # the quick runs start training processes: a minute or two in all

NAMES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
# Benchmarks whose quick run a test below makes anyway, with more checks (each run starts training
# processes: one quick run of each is enough).
RUN_BELOW = {"bench_step_pairs", "bench_log_every_step", "bench_end_to_end"}
# Rows the side-by-side benchmarks must show for each peer tracker installed (the `bench` extra).
PEER_ROWS = {
    "bench_hot_path": (
        "case",
        {
            "tensorboard": {"tensorboard add_scalar x8"},
            "wandb": {"wandb log (offline)"},
            "mlflow": {"mlflow log_metrics (async)", "mlflow log_metrics (default, sync)"},
        },
    ),
    "bench_end_to_end": (
        "tracker",
        {"tensorboard": {"tensorboard"}, "wandb": {"wandb"}, "mlflow": {"mlflow"}},
    ),
    "bench_step_overhead": (
        "tracker",
        {"tensorboard": {"tensorboard"}, "wandb": {"wandb"}, "mlflow": {"mlflow"}},
    ),
}


def test_there_are_benchmarks() -> None:
    assert {"bench_hot_path", "bench_end_to_end", "bench_card_render"} <= set(NAMES)
    assert set(NAMES) >= RUN_BELOW


def _wrote_its_results(out: dict[str, object], path: Path) -> None:
    assert out and "error" not in out
    assert json.loads(path.read_text())["results"] == json.loads(json.dumps(out["results"]))


@pytest.mark.parametrize("name", sorted(set(NAMES) - RUN_BELOW))
def test_benchmark_runs_quick(name: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TRAINCARD_DIR", str(tmp_path / "store"))
    out = importlib.import_module(f"benchmarks.{name}").main(["--quick", "--json", str(tmp_path / "r.json")])
    _wrote_its_results(out, tmp_path / "r.json")
    _shows_each_installed_peer(name, out)


def _shows_each_installed_peer(name: str, out: dict[str, Any]) -> None:
    if name in PEER_ROWS:
        column, by_peer = PEER_ROWS[name]
        shown = {row[column] for row in out["results"]}
        for peer, rows in by_peer.items():
            assert (rows <= shown) == (find_spec(peer) is not None), (peer, shown)


def test_step_overhead_blocks_alternate_abba_and_pair_one_on_with_one_off() -> None:
    from benchmarks.bench_step_overhead import WARMUP_STEPS, Blocks

    switched: list[bool] = []
    blocks = Blocks(10, switched.append)
    for _ in range(WARMUP_STEPS + 8 * 10):
        blocks.tick()
    assert switched == [False, True, True, False, False, True, True, False, False]
    assert [block[0] for block in blocks.done] == switched[:8]
    result = blocks.result()
    assert (
        len(result["ratios"]) == len(result["cpu_ratios"]) == 4
        and len(result["on_s"]) == len(result["off_s"]) == 4
    )
    assert result["ratios"][0] == result["on_s"][0] / result["off_s"][0]  # pair 1: off, then on
    assert result["ratios"][1] == result["on_s"][1] / result["off_s"][1]  # pair 2: on, then off


def test_end_to_end_runs_alternate_abba_and_pair_each_tracked_run_with_its_neighbour() -> None:
    from benchmarks.bench_end_to_end import StepClock, pairs_of, run_order

    assert run_order(3) == [False, True, False, True, True, False, False, True]
    figures = [9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    runs = [
        {"tracked": tracked, "warmup": n < 2, "step_s": value}
        for n, (tracked, value) in enumerate(zip(run_order(3), figures, strict=True))
    ]
    assert pairs_of(runs, "step_s") == [(2.0, 1.0), (3.0, 4.0), (6.0, 5.0)]  # (tracked, plain)

    clock = StepClock()
    clock.marks = [(0.0, 0.0, 0.0), (1.0, 0.5, 0.6), (3.0, 1.5, 1.8), (5.0, 2.5, 3.0)]
    got = clock.per_step(skip=1)  # steps 2 and 3: 4 s of wall, 2 s on the training thread, 2.4 s in all
    assert got == pytest.approx({"step_s": 2.0, "thread_s": 1.0, "other_s": 0.2, "wait_s": 1.0})


def test_median_interval_widens_by_as_much_as_groups_disagree() -> None:
    from benchmarks._harness import median_interval

    base = [i / 10 for i in range(-5, 6)]
    groups = [[x + offset for x in base] for offset in (-1.0, 0.0, 1.0)]
    pooled_low, pooled_high = median_interval([[x for g in groups for x in g]])
    low, high = median_interval(groups)
    assert low <= pooled_low <= 0.0 <= pooled_high <= high
    assert high - low > 1.5 * (pooled_high - pooled_low)
    assert median_interval([[0.25] * 5, [0.25] * 7]) == (0.25, 0.25)


def _process(plain: float, tracked: float) -> list[dict[str, object]]:
    """One child process's runs: a warm-up of each, then two ABBA pairs."""
    warmup = [{"tracked": t, "warmup": True, "step_s": 1.0} for t in (False, True)]
    timed = [
        {"tracked": t, "warmup": False, "step_s": tracked if t else plain, "wait_s": 0.0}
        | {"thread_s": 0.5, "other_s": 0.1 if t else 0.0}
        for t in (False, True, True, False)
    ]
    return warmup + timed


def test_end_to_end_overhead_pools_pairs_and_shows_each_process() -> None:
    from benchmarks.bench_end_to_end import overhead_row

    row = overhead_row("hf", "traincard", [_process(1.0, 1.01), _process(1.0, 1.03)])
    assert (row["processes"], row["pairs"]) == (2, 4)
    assert row["overhead_pct"] == pytest.approx(2.0)
    assert (row["process_min_pct"], row["process_max_pct"]) == pytest.approx((1.0, 3.0))
    assert row["other_cpu_us"] == pytest.approx(1e5) and row["thread_us"] == 0.0


def test_end_to_end_pools_the_processes_of_earlier_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks import bench_end_to_end

    day1 = {
        "raw": {"hf/traincard": [_process(1.0, 1.01), _process(1.0, 1.02)], "hf/none": [_process(1.0, 1.0)]}
    }
    day2 = {"raw": {"hf/traincard": [_process(2.0, 2.08)]}}
    paths = []
    for n, run in enumerate((day1, day2)):
        paths.append(tmp_path / f"run{n}.json")
        paths[-1].write_text(json.dumps(run))
    out = bench_end_to_end.main(["--pool", *map(str, paths), "--json", str(tmp_path / "pooled.json")])
    rows = {row["tracker"]: row for row in out["results"]}
    assert (rows["traincard"]["processes"], rows["traincard"]["pairs"]) == (3, 6)
    assert rows["traincard"]["overhead_pct"] == pytest.approx(2.0)  # of 1, 1, 2, 2, 4, 4 %
    assert (rows["traincard"]["process_min_pct"], rows["traincard"]["process_max_pct"]) == pytest.approx(
        (1, 4)
    )
    assert (rows["none"]["processes"], rows["none"]["overhead_pct"]) == (1, 0.0)
    assert json.loads((tmp_path / "pooled.json").read_text())["pooled"] == ["run0.json", "run1.json"]


def test_end_to_end_runs_quick_beside_the_peers_and_plain_against_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import bench_end_to_end

    monkeypatch.setenv("TRAINCARD_DIR", str(tmp_path / "store"))
    out = bench_end_to_end.main(["--quick", "--control", "--json", str(tmp_path / "r.json")])
    _wrote_its_results(out, tmp_path / "r.json")
    _shows_each_installed_peer("bench_end_to_end", out)
    trackers = [row["tracker"] for row in out["results"]]
    assert trackers[0] == "traincard" and trackers[-1] == "none"
    control = out["raw"]["raw/none"]
    assert len(control) == 1 and sum(run["tracked"] for run in control[0]) == 2


def test_step_pairs_time_every_step_once_in_pairs_of_one_on_and_one_off() -> None:
    from benchmarks.bench_step_pairs import WARMUP_STEPS, StepPairs, plan

    order = plan(400)
    pairs_of_plan = list(zip(order[0::2], order[1::2], strict=True))
    assert all(first != second for first, second in pairs_of_plan)
    assert 70 < sum(first for first, _ in pairs_of_plan) < 130  # both orders, about as often
    switched: list[bool] = []
    pairs = StepPairs(8, switched.append, None)
    states = []
    for _ in range(WARMUP_STEPS + 8 + 2):
        pairs.tick()
        states.append(pairs.on)
    timed = states[WARMUP_STEPS : WARMUP_STEPS + 8]
    assert timed == plan(8)
    assert all(states[:WARMUP_STEPS]) and all(states[WARMUP_STEPS + 8 :])  # warm-up and wind-down on
    changes = [b for a, b in zip([True, *timed], [*timed, True], strict=True) if a != b]
    assert switched == changes
    assert [step[0] for step in pairs.timed] == timed
    result = pairs.result()
    assert len(result["on"]) == len(result["off"]) == 4


def test_background_gate_holds_tracker_threads_and_waits_for_work_in_progress() -> None:
    import threading
    import time

    from benchmarks.bench_step_pairs import BackgroundGate

    units: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.001):
            time.sleep(0.05)  # a unit of work
            units.append(time.monotonic())

    gate = BackgroundGate()
    with gate.installed():
        worker = threading.Thread(target=loop, name="traincard-test")
        worker.start()
        other_waits = threading.Event().wait(0.01)  # other threads' waits are left alone
        while len(units) < 2:
            time.sleep(0.01)
        gate.close()
        closed_at = time.monotonic()
        assert not other_waits and gate.timeouts == 0
        assert units[-1] <= closed_at  # the unit in progress was waited for ...
        time.sleep(0.2)
        held = len(units)
        assert units[-1] <= closed_at  # ... and none started while closed
        gate.set(True)
        while len(units) == held:
            time.sleep(0.01)
        gate.close()
        gate.release()  # released: runs freely whatever is set
        count = len(units)
        while len(units) == count:
            time.sleep(0.01)
        stop.set()
        worker.join()
    assert threading.Event.wait is not None and "installed" not in threading.Event.wait.__qualname__


def test_step_pairs_before_runs_another_checkouts_package_beside_this_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from benchmarks.bench_step_pairs import main

    before = tmp_path / "before"
    shutil.copytree(
        REPO / "traincard_otel", before / "traincard_otel", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = main(["--quick", "--before", str(before), "--json", str(tmp_path / "r.json")])
    _wrote_its_results(out, tmp_path / "r.json")
    assert [(row["tracker"], row["processes"]) for row in out["results"]] == [
        ("traincard", 2),
        ("none", 2),
        ("before", 2),
    ]
    codes = {case: {run["code"] for run in runs} for case, runs in out["raw"].items()}
    assert codes == {
        "raw/traincard/scaled": {str((REPO / "traincard_otel").resolve())},
        "raw/none/scaled": {None},  # the control imports no tracker
        "raw/before/scaled": {str((before / "traincard_otel").resolve())},
    }
    with pytest.raises(SystemExit, match="no traincard_otel package"):
        main(["--quick", "--before", str(tmp_path)])


def test_step_pairs_overhead_counts_bursts_and_pools_processes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.bench_step_pairs import main, overhead

    off = [0.005 + 0.0001 * (i % 7) for i in range(1000)]
    on = [t * 1.002 for t in off]
    on[500] += 0.010  # one flush: 10 ms in 1000 pairs, 10 µs a step
    figures = overhead([(on, off)])
    expected = (sum(on) / sum(off) - 1) * 100
    assert abs(figures["pct"] - expected) < 1e-9 and expected > 0.3  # the burst counts ...
    assert abs(figures["median_pair_pct"] - 0.2) < 1e-6  # ... where a median drops it
    assert figures["ci95_low_pct"] <= figures["pct"] <= figures["ci95_high_pct"]

    steps = [[t, t * 0.9, 0.0] for t in off[:200]]
    run = {"raw": {"raw/traincard/scaled": [{"on": steps, "off": steps, "gate_timeouts": 0}]}}
    (tmp_path / "a.json").write_text(json.dumps(run))
    pooled = main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "a.json")])
    (row,) = pooled["results"]
    assert row["processes"] == 2 and row["pairs"] == 400 and row["overhead_pct"] == 0.0


def test_log_every_step_pairs_give_the_median_ratio_and_the_threads_cpu() -> None:
    from benchmarks.log_every_step.pairs import pairs_row

    def run(step_s: float, thread_s: float, other_s: float) -> dict[str, object]:
        return {"step_s": step_s, "thread_s": thread_s, "threads_s": {"traincard-schedule": other_s}}

    pairs = [(run(1.0 + d, 0.5, 0.001), run(1.0, 0.5, 0.0)) for d in (0.01, 0.02, 0.03, 0.5)]
    row = pairs_row(pairs)  # type: ignore[arg-type]
    assert row["pairs"] == 4
    assert row["overhead_pct"] == pytest.approx(2.5)  # the median: one outlier pair moves it little
    assert row["mean_pct"] == pytest.approx(14.0)
    assert row["ci95_low_pct"] <= row["overhead_pct"] <= row["ci95_high_pct"]
    assert row["other_cpu_us"] == pytest.approx(1000.0)
    assert row["wait_us"] == pytest.approx(25000.0)  # wall time not on the training thread's CPU


def test_log_every_step_pools_earlier_runs_pairs_of_one_malloc_setting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.bench_log_every_step import main

    def run(d: float) -> dict[str, object]:
        return {"step_s": 1.0 + d, "thread_s": 1.0, "threads_s": {}}

    plain = {"step_s": 1.0, "thread_s": 1.0, "threads_s": {}}
    for name, ds, malloc in (("a", (0.01, 0.02), "fixed"), ("b", (0.03,), "fixed"), ("c", (0.5,), None)):
        result = {"malloc": malloc} if malloc else {}
        data = {"results": [result], "raw": {"pairs": [[run(d), plain] for d in ds]}}
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    pooled = main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    (row,) = pooled["results"]
    assert row["malloc"] == "fixed" and row["pairs"] == 3
    assert row["overhead_pct"] == pytest.approx(2.0)
    with pytest.raises(SystemExit, match="different malloc settings"):
        main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "c.json")])
    turns = {
        "results": [{"malloc": "fixed", "design": "turns of 100 steps"}],
        "raw": {"pairs": [[run(0.01), plain]]},
    }
    (tmp_path / "t.json").write_text(json.dumps(turns))
    with pytest.raises(SystemExit, match="different designs"):  # back to back (unnamed) and in turns
        main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "t.json")])
    assert main(["--pool", str(tmp_path / "t.json")])["results"][0]["design"] == "turns of 100 steps"
    for name, code in (("a", "tree1"), ("b", "tree2")):  # runs that name the code they measured
        data = json.loads((tmp_path / f"{name}.json").read_text())
        (tmp_path / f"{name}.json").write_text(json.dumps({**data, "code": code}))
    with pytest.raises(SystemExit, match="different or uncommitted code"):
        main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert main(["--pool", str(tmp_path / "a.json"), str(tmp_path / "a.json")])["code"] == "tree1"


def test_log_every_step_runs_a_pairs_processes_in_turns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.bench_log_every_step import main

    out = main(["--quick", "--slice", "2", "--json", str(tmp_path / "r.json")])
    _wrote_its_results(out, tmp_path / "r.json")
    (row,) = out["results"]
    assert row["design"] == "turns of 2 steps, random heap layout, timers scaled" and row["pairs"] == 1
    tracked, plain = out["raw"]["pairs"][0]  # the instrumented process's timers at twice their defaults
    assert tracked["timers"] == {"TRAINCARD_FLUSH_INTERVAL": "4.0", "TRAINCARD_SYSTEM_INTERVAL": "4.0"}
    assert set(plain["timers"].values()) == {None}
    # each process drew a heap layout of its own, plain or not
    assert tracked["layout"] != plain["layout"] and tracked["heap_blocks"] and plain["heap_blocks"]
    for figures in (tracked, plain):  # 12 steps, 4 of warm-up: 4 turns of 2 timed
        assert figures["turns"] == 4 and figures["stdout_lines"] >= 12
        assert figures["step_s"] > 0 and figures["thread_s"] > 0
    with pytest.raises(SystemExit):  # the warm-up must end at a turn's end
        main(["--steps", "12", "--skip", "5", "--slice", "2", "--pairs", "1"])
    assert main(["--converter", "--quick", "--skip", "7"])["results"]  # (a mode without turns)
    attributed = main(
        ["--attribute", "--quick", "--slice", "2", "--variants", "traincard", "--intervals", "default"]
    )
    plain_row, tracked_row = attributed["results"]
    assert (plain_row["case"], tracked_row["case"]) == ("plain", "traincard")
    assert plain_row["vs_plain_pct"] == 0 and tracked_row["other_cpu_us"] > 0
    (run,) = attributed["raw"]["runs"]["traincard"]  # --intervals default: the timers left alone
    assert run["turns"] == 4 and set(run["timers"].values()) == {None}


def test_log_every_step_pairs_two_plain_processes_and_can_keep_each_scripts_layout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.bench_log_every_step import main

    out = main(["--plain-pairs", "--steps", "12", "--skip", "4", "--slice", "2", "--pairs", "1"])
    (row,) = out["results"]
    assert row["design"] == "turns of 2 steps, random heap layout" and row["pairs"] == 1
    assert len(out["raw"]["ratios"]) == 1 and row["largest_pct"] == abs(row["median_pct"])
    fixed = main(["--quick", "--slice", "2", "--layout", "fixed"])
    assert fixed["results"][0]["design"] == "turns of 2 steps, timers scaled"
    assert all(run["layout"] is None and run["heap_blocks"] == 0 for run in fixed["raw"]["pairs"][0])


def test_log_every_step_names_the_product_code_it_measured() -> None:
    from benchmarks.log_every_step.pairs import product_code

    code = product_code()
    tree = subprocess.run(
        ["git", "rev-parse", "HEAD:traincard_otel"], capture_output=True, text=True, cwd=REPO
    )
    if tree.returncode != 0:
        assert code is None
    else:
        assert code is not None and code.startswith(tree.stdout.strip())


def test_log_every_step_reads_callgrinds_first_dump_by_thread(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.log_every_step.instructions import callgrind_threads

    # --separate-threads=yes: <stem>.<dump>-<thread>; the final dump at exit (no dump number) and
    # a second dump are not the counted steps.
    for name, total in (("cg.1-01", 2815624316), ("cg.1-05", 124922397), ("cg-01", 99), ("cg.2-01", 7)):
        (tmp_path / name).write_text(f"version: 1\ncreator: callgrind\nthread: 1\nsummary: {total}\n")
    (tmp_path / "cg.1-02").write_text("version: 1\nthread: 2\n")  # a thread that ran no counted code
    assert callgrind_threads(tmp_path, "cg") == {1: 2815624316, 5: 124922397}


def test_log_every_step_counts_the_training_threads_calls_collections_and_system_calls() -> None:
    import shutil

    from benchmarks.bench_log_every_step import main

    out = main(["--calls", "--quick", "--variants", "traincard"])
    plain, tracked = out["results"]
    assert (plain["case"], tracked["case"]) == ("plain", "traincard")
    assert plain["python_calls_vs_plain"] == 0 and plain["python_calls"] > 100
    assert tracked["python_calls_vs_plain"] > 0  # the instrumented training thread reports step ends
    step_end = "traincard_otel/_write/report/metrics.py:step_end"
    runs = out["raw"]["runs"]
    assert runs["traincard"]["calls"][step_end] == 1.0  # one a step, counted exactly
    assert step_end not in runs["plain"]["calls"]
    assert all(row["gc_runs"] >= 0 and row["gc_us"] >= 0 for row in out["results"])
    if shutil.which("strace") and "syscalls" in plain:  # where strace may attach
        for row in (plain, tracked):  # an unbuffered print is two writes, wherever they go
            assert row["write calls"] >= 2


def test_log_every_step_reads_straces_table_per_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.log_every_step.calls import strace_counts

    (tmp_path / "s.txt").write_text(
        "% time     seconds  usecs/call     calls    errors syscall\n"
        "------ ----------- ----------- --------- --------- ----------------\n"
        " 64.35    0.000527           0      2400           newfstatat\n"
        " 26.62    0.000218           1       123         8 futex\n"
        "------ ----------- ----------- --------- --------- ----------------\n"
        "100.00    0.000819           0      2523         8 total\n"
    )
    assert strace_counts(tmp_path / "s.txt", 200) == {"newfstatat": 12.0, "futex": 0.615}
    assert strace_counts(tmp_path / "none.txt", 200) is None


def test_log_every_step_counts_no_system_calls_where_strace_cannot_attach(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from benchmarks.log_every_step.calls import Counting

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    tracing, refused = Counting(str(first)), Counting(str(second))
    tracing.start()
    refused.start()  # a thread takes one tracer: this strace cannot attach
    refused.stop()
    tracing.stop()
    assert refused.figures(1)["syscalls"] is None  # not counted, rather than none counted
    counted = tracing.figures(1)["syscalls"]
    assert counted is not None and counted.get("clock_nanosleep", 0) >= 1  # the other's second


def test_the_anatomy_mechanisms_each_take_their_marks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``bench_anatomy --mechanisms`` counts each way of marking under callgrind; quick, it runs
    each one for three steps: every mechanism but the plain steps marks every step."""
    from benchmarks.bench_anatomy import main

    out = main(["--mechanisms", "--quick", "--json", str(tmp_path / "r.json")])
    taken = {row["mechanism"]: row["marks in 3 steps"] for row in out["results"]}
    assert taken.pop("plain") == 0 and len(taken) == 9
    assert all(n >= 3 for n in taken.values()), taken


def test_the_anatomy_benchmark_times_each_backward_path_as_installed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``bench_anatomy --output-hooks``, quick: the raw loop's side runs bracketed and the other
    from the output's hooks after every switch (the benchmark asserts it per block), each against
    the one side without the anatomy."""
    from benchmarks.bench_anatomy import main

    out = main(["--quick", "--output-hooks", "--json", str(tmp_path / "r.json")])
    cases = [row["case"] for row in out["results"]]
    assert len(cases) == len(set(cases)), cases
    for label in ("anatomy on", "anatomy on, backward from output hooks"):
        assert f"wall: {label}: overhead % (sum on / sum off - 1)" in cases
    assert cases.count("wall: anatomy off, ms / step") == 1
