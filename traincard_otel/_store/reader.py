"""Read a task's store back: every attempt and rank merged into one timeline.

Used by :func:`traincard_otel.load`, the card and the CLI. Segments are immutable, so parsed
segments are cached per store and a live reader only fetches what is new. A segment that cannot
be parsed is skipped and counted, never fatal.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import operator
from array import array
from collections.abc import Callable, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any

from .._insights.goodput import Goodput, goodput
from .._schema import Attr, Event
from . import layout, segment
from .backends import Backend
from .columns import FLOAT, INT, SMALL, Column, extend, from_arrow_floats, from_arrow_ints, repeat

if TYPE_CHECKING:
    from .frames import Kind

Record = dict[str, Any]

#: Draws a RunData as the card's HTML; set by the package facade (the card sits above the store).
html_renderer: Callable[[RunData], str] | None = None
DATA_WAIT_TAIL = 1000


@dataclasses.dataclass
class Series:
    """One metric's points in report order (rows from every attempt and rank, each labelled).

    Columns are lists, or for the per-rank series (step times, throughput, data wait) compact
    typed columns (:class:`~traincard_otel._store.columns.Column`) that read like lists.
    """

    name: str
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    steps: MutableSequence[Any] = dataclasses.field(default_factory=list)
    values: MutableSequence[float] = dataclasses.field(default_factory=list)
    times: MutableSequence[float] = dataclasses.field(default_factory=list)
    attempts: MutableSequence[int] = dataclasses.field(default_factory=list)
    ranks: MutableSequence[int] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.values)


def rank_series(name: str, rank: int) -> Series:
    """An empty per-rank series with compact columns (a gang holds one per rank, each run long)."""
    return Series(
        name=name,
        tags={"rank": str(rank)},
        steps=Column(INT),
        values=Column(FLOAT),
        times=Column(FLOAT),
        attempts=Column(SMALL),
        ranks=Column(SMALL),
    )


@dataclasses.dataclass
class RunData:
    """Everything one task recorded. ``metrics`` maps a metric name (with ``{tag=value}`` when
    tagged) to its :class:`Series`; ``system`` maps a system metric key to a time series."""

    source: str
    metrics: dict[str, Series] = dataclasses.field(default_factory=dict)
    step_times: dict[int, Series] = dataclasses.field(default_factory=dict)
    throughput: dict[str, Series] = dataclasses.field(default_factory=dict)
    system: dict[str, Series] = dataclasses.field(default_factory=dict)
    # per rank, the data-wait time of its last DATA_WAIT_TAIL timed steps (not the whole run: a
    # second full series per rank would grow a 64-rank gang's memory by half for one figure)
    data_wait: dict[int, Series] = dataclasses.field(default_factory=dict)
    data_wait_total: dict[int, float] = dataclasses.field(default_factory=dict)  # per rank, whole run
    phases: list[Record] = dataclasses.field(default_factory=list)
    checkpoints: list[Record] = dataclasses.field(default_factory=list)
    logs: list[Record] = dataclasses.field(default_factory=list)
    events: list[Record] = dataclasses.field(default_factory=list)
    states: list[Record] = dataclasses.field(default_factory=list)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    gang: dict[str, Any] = dataclasses.field(default_factory=dict)  # see :mod:`.gang`

    def to_rows(self, kind: Kind = "metrics") -> list[dict[str, Any]]:
        """One dict per metric point, step time, log line, checkpoint or event (``kind``)."""
        from .frames import rows

        return rows(self, kind)

    def to_arrow(self, kind: Kind = "metrics") -> Any:
        """The same as a ``pyarrow.Table`` (for Parquet, DuckDB, Polars)."""
        from .frames import to_arrow

        return to_arrow(self, kind)

    def to_pandas(self, kind: Kind = "metrics", *, wide: bool = False) -> Any:
        """The same as a ``pandas.DataFrame``; ``wide=True`` pivots metrics to a column each."""
        from .frames import to_pandas

        return to_pandas(self, kind, wide=wide)

    def _repr_html_(self) -> str:
        """The card, inline in Jupyter (sandboxed in an iframe, so its scripts run on their own)."""
        if html_renderer is None:
            return f"<pre>RunData({self.source!r})</pre>"
        import html

        page = html_renderer(self)
        return (
            f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:900px;border:0" '
            'sandbox="allow-scripts"></iframe>'
        )

    @property
    def attempts(self) -> list[int]:
        return sorted({int(s.get("attempt", 0)) for s in self.states})

    @property
    def status(self) -> Record:
        """Status of the latest attempt, from rank 0's state (other ranks fill gaps)."""
        if not self.states:
            return {}
        latest = max(self.attempts)
        states = sorted(
            (s for s in self.states if s.get("attempt") == latest), key=lambda s: s.get("rank", 0)
        )
        merged = dict(states[0])
        merged["restarts"] = latest
        merged["ranks"] = {s.get("rank", 0): s for s in states}
        for s in states:
            if s.get("failure") and not merged.get("failure"):
                merged["failure"] = s["failure"]
        if self.gang.get("failure"):  # a gang's first failure, not what a surviving rank raised
            merged["failure"] = self.gang["failure"]
        return merged

    @property
    def goodput(self) -> Goodput | None:
        """Wall time split into productive training steps and the rest (startup, data wait, eval,
        checkpoints, stalls, restarts, shutdown); None when no step was timed.
        :mod:`traincard_otel._insights.goodput` defines each category."""
        return goodput(self)

    @property
    def failure(self) -> Record | None:
        return self.status.get("failure")

    def series(self, name: str) -> Series:
        return self.metrics[name]


def _series_key(name: str, tags: dict[str, str] | None) -> str:
    if not tags:
        return name
    return name + "{" + ",".join(f"{k}={v}" for k, v in sorted(tags.items())) + "}"


class StoreReader:
    """Reads a store, then only what is new on each :meth:`read` (segments are immutable).

    The live refresher keeps one for the whole run, so a refresh costs what was written since the
    last one, not the run's length.
    """

    def __init__(self, backend: Backend, source: str | None = None) -> None:
        self.backend = backend
        self.data = RunData(source=source or backend.spec)
        self._done: set[str] = set()
        self._corrupt: set[str] = set()
        self._records = 0
        self._seqs: dict[tuple[int, int, str], set[int]] = {}  # segments read, per writer

    def _add_part(self, p: layout.ObjectName, name: str, raw: bytes) -> None:
        from .compaction import read_parquet

        seen = self._seqs.setdefault((p.attempt, p.rank, p.writer), set())
        try:
            table = read_parquet(raw)
        except Exception:  # a corrupt part is skipped and counted, like a corrupt segment
            self._corrupt.add(name)
            self._done.add(name)
            return
        self._records += _add_table(self.data, table, seen, p.attempt, p.rank)
        seen.update(range(p.seq, p.last + 1))
        self._done.add(name)

    def read(self) -> RunData:
        # Millions of small objects are created and none of them form cycles: the cyclic GC would
        # only rescan them again and again (it made a 1M-step read several times slower).
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._read()
        finally:
            if enabled:
                gc.enable()

    def _read(self) -> RunData:
        data = self.data
        parsed = sorted((p, n) for n in self.backend.list() if (p := layout.parse(n)) is not None)
        parts = [(p, n) for p, n in parsed if p.kind == "part" and n not in self._done]
        covered = {(p.attempt, p.rank, p.writer, seq) for p, _n in parts for seq in range(p.seq, p.last + 1)}
        new = [
            n
            for p, n in parsed
            if p.kind == "segment"
            and n not in self._done
            and (p.attempt, p.rank, p.writer, p.seq) not in covered
        ]
        fetched = self.backend.read_many([n for _p, n in parts] + new) if parts or new else {}
        for p, name in parsed:
            if name not in fetched:
                continue
            if p.kind == "part":
                self._add_part(p, name, fetched[name])
                continue
            records, corrupt = segment.decode_columns(fetched[name])
            if corrupt:
                self._corrupt.add(name)
            for rec in records:
                if rec.get("k") == segment.PACKED_STEPS:  # a run of step ends: whole columns at once
                    self._records += _add_step_columns(data, rec, p.attempt, p.rank) - 1
                else:
                    _add(data, rec, p.attempt, p.rank)
            self._records += len(records)
            self._done.add(name)
            self._seqs.setdefault((p.attempt, p.rank, p.writer), set()).add(p.seq)
        stats: dict[str, Any] = {
            "segments": len(self._done),
            "corrupt_segments": len(self._corrupt),
            "corrupt_names": sorted(self._corrupt),
            "records": self._records,
            "dropped": {},
        }
        data.states = self._states([n for p, n in parsed if p.kind == "state"], stats)
        data.stats = stats
        return data

    def _states(self, names: list[str], stats: dict[str, Any]) -> list[Record]:
        states = []
        for name, raw in self.backend.read_many(names).items():
            try:
                state = json.loads(raw)
            except ValueError:
                stats["corrupt_segments"] += 1
                stats["corrupt_names"].append(name)
                continue
            states.append(state)
            dropped = stats["dropped"]
            for reason, n in (state.get("dropped") or {}).items():
                dropped[reason] = dropped.get(reason, 0) + int(n)
            if state.get("hot_path_overflow"):
                dropped["buffer_full"] = dropped.get("buffer_full", 0) + int(state["hot_path_overflow"])
        return states


def _add_table(data: RunData, table: Any, skip: set[int], attempt: int, rank: int) -> int:
    """Add a compacted part, a column at a time; rows of segments already read are skipped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if skip:
        table = table.filter(pc.invert(pc.is_in(table["seq"], value_set=pa.array(sorted(skip), pa.int64()))))
    kinds, whole = table["k"], pc.is_valid(table["rest"])  # a record kept whole is read as one
    columnar = pc.invert(whole)
    # Filtering a table filters every column it has: select each kind's columns first.
    have = set(table.column_names)
    metrics = table.select([c for c in ("name", "g", "s", "value", "t") if c in have])
    metrics = metrics.filter(pc.and_(pc.equal(kinds, "m"), columnar))
    for combo in metrics.group_by(["name", "g"]).aggregate([]).to_pylist():
        name, tags_json = combo["name"], combo["g"]
        tags = json.loads(tags_json) if tags_json else None
        mask = pc.equal(metrics["name"], name)
        mask = pc.and_(mask, pc.equal(metrics["g"], tags_json) if tags_json else pc.is_null(metrics["g"]))
        rows = metrics.filter(mask)
        key = _series_key(name, tags) if tags else name
        series = data.metrics.get(key)
        if series is None:
            series = data.metrics[key] = Series(name=name, tags=dict(tags or {}))
        _extend(
            series, rows["s"].to_pylist(), rows["value"].to_pylist(), rows["t"].to_pylist(), attempt, rank
        )
    # A step end without a duration adds no point, as in a segment.
    steps = table.select([c for c in ("s", "value", "t", "w", "n", "tok") if c in have])
    steps = steps.filter(pc.and_(pc.and_(pc.equal(kinds, "st"), columnar), pc.is_valid(table["value"])))
    if steps.num_rows:
        series = data.step_times.get(rank)
        if series is None:
            series = data.step_times[rank] = rank_series("step_time", rank)
        s = from_arrow_ints(steps["s"])
        _extend(series, s, from_arrow_floats(steps["value"]), from_arrow_floats(steps["t"]), attempt, rank)
        waited = steps.filter(pc.is_valid(steps["w"])) if "w" in steps.column_names else None
        if waited is not None and waited.num_rows:
            waited_s = float(pc.sum(waited["w"]).as_py())
            data.data_wait_total[rank] = data.data_wait_total.get(rank, 0.0) + waited_s
            waits = data.data_wait.get(rank)
            if waits is None:
                waits = data.data_wait[rank] = rank_series("data_wait", rank)
            tail = waited.slice(max(0, waited.num_rows - DATA_WAIT_TAIL))
            _extend(
                waits,
                from_arrow_ints(tail["s"]),
                from_arrow_floats(tail["w"]),
                from_arrow_floats(tail["t"]),
                attempt,
                rank,
            )
            _trim(waits)
        for column, tname in (("n", "samples_per_second"), ("tok", "tokens_per_second")):
            # a rate where a count and a duration are known (a step without a duration was dropped above)
            has = pc.and_(pc.not_equal(steps[column], 0), pc.not_equal(steps["value"], 0))
            counted = steps.filter(pc.fill_null(has, False))
            if counted.num_rows:
                key = f"{tname}{{rank={rank}}}"
                tput = data.throughput.get(key)
                if tput is None:
                    tput = data.throughput[key] = rank_series(tname, rank)
                rates = pc.divide(pc.cast(counted[column], pa.float64()), counted["value"])
                _extend(
                    tput,
                    from_arrow_ints(counted["s"]),
                    from_arrow_floats(rates),
                    from_arrow_floats(counted["t"]),
                    attempt,
                    rank,
                )
    for rest in table["rest"].filter(whole).to_pylist():
        _add(data, json.loads(rest), attempt, rank)
    return int(table.num_rows)  # pyarrow is untyped


def _no_gaps(column: Sequence[Any]) -> bool:
    """Whether every value of a float column is set and non-zero (C-speed scans; a false "no" only
    sends the caller down the per-value path)."""
    if 0.0 in column:
        return False
    total = sum(column)
    return bool(total == total)  # NaN anywhere makes the sum NaN


def _all_nan(column: Any) -> bool:
    """Whether a float array holds only the writer's NaN (no value recorded), compared as bytes."""
    return (
        isinstance(column, array) and column.tobytes() == (array(FLOAT, [math.nan]) * len(column)).tobytes()
    )


def _add_step_columns(data: RunData, rec: Record, attempt: int, rank: int) -> int:
    """A packed run of step ends, as :func:`_add` adds each of its rows; returns its row count.

    A run is usually whole (every step timed, every count set): then columns are added as they
    are, without a Python object per value.
    """
    s, t, d, w, n, tok = rec["s"], rec["t"], rec["d"], rec["w"], rec["n"], rec["tok"]
    whole = _no_gaps(d)
    keep = range(len(s)) if whole else [i for i, x in enumerate(d) if x == x and x]
    if not keep:  # a step end without a duration adds no point
        return len(s)
    ss = s if whole else [s[i] for i in keep]
    tt = t if whole else [t[i] for i in keep]
    dd = d if whole else [d[i] for i in keep]
    series = data.step_times.get(rank)
    if series is None:
        series = data.step_times[rank] = rank_series("step_time", rank)
    _extend(series, ss, dd, tt, attempt, rank)
    if not _all_nan(w):
        if whole and _no_gaps(w):
            waited_s = float(sum(w))
            cut = slice(-DATA_WAIT_TAIL, None)
            tail_s, tail_w, tail_t = ss[cut], w[cut], tt[cut]
        else:
            waited = [j for j, i in enumerate(keep) if w[i] == w[i]]
            waited_s, tail = sum(w[keep[j]] for j in waited), waited[-DATA_WAIT_TAIL:]
            tail_s, tail_w, tail_t = [ss[j] for j in tail], [w[keep[j]] for j in tail], [tt[j] for j in tail]
        if len(tail_s):
            data.data_wait_total[rank] = data.data_wait_total.get(rank, 0.0) + waited_s
            waits = data.data_wait.get(rank)
            if waits is None:
                waits = data.data_wait[rank] = rank_series("data_wait", rank)
            _extend(waits, tail_s, tail_w, tail_t, attempt, rank)
            _trim(waits)
    for column, tname in ((n, "samples_per_second"), (tok, "tokens_per_second")):
        if not any(column):
            continue
        if whole and 0 not in column and None not in column:
            counted_steps, counted_times = ss, tt
            rates: Sequence[float] = array(FLOAT, map(operator.truediv, column, dd))
        else:
            counted = [j for j, i in enumerate(keep) if column[i]]
            if not counted:
                continue
            counted_steps, counted_times = [ss[j] for j in counted], [tt[j] for j in counted]
            rates = [column[keep[j]] / dd[j] for j in counted]
        key = f"{tname}{{rank={rank}}}"
        tput = data.throughput.get(key)
        if tput is None:
            tput = data.throughput[key] = rank_series(tname, rank)
        _extend(tput, counted_steps, rates, counted_times, attempt, rank)
    return len(s)


def _trim(series: Series, keep: int = DATA_WAIT_TAIL) -> None:
    """Keep only the last ``keep`` points of ``series``."""
    cut = len(series.values) - keep
    if cut > 0:
        for column in (series.steps, series.values, series.times, series.attempts, series.ranks):
            del column[:cut]


def _extend(
    series: Series, steps: Sequence[Any], values: Sequence[Any], times: Sequence[Any], attempt: int, rank: int
) -> None:
    n = len(values)
    series.steps = extend(series.steps, steps)
    if not isinstance(values, array) and None in values:  # the per-value rewrite only where one is missing
        values = [float("nan") if v is None else v for v in values]
    series.values = extend(series.values, values)
    series.times = extend(series.times, times)
    typed = isinstance(series.attempts, array)
    series.attempts = extend(series.attempts, repeat(SMALL, attempt, n) if typed else [attempt] * n)
    series.ranks = extend(series.ranks, repeat(SMALL, rank, n) if typed else [rank] * n)


def read_store(backend: Backend, source: str | None = None) -> RunData:
    """Read and merge everything under ``backend``."""
    return StoreReader(backend, source).read()


def _append(series: Series, step: Any, value: Any, t: float, attempt: int, rank: int) -> None:
    if isinstance(series.steps, array):  # a typed column takes what fits its type, else becomes a list
        _extend(series, [step], [value], [t], attempt, rank)
        return
    series.steps.append(step)
    series.values.append(float(value) if value is not None else float("nan"))
    series.times.append(t)
    series.attempts.append(attempt)
    series.ranks.append(rank)


def _add_row(metrics: dict[str, Series], rec: Record, t: float, attempt: int, rank: int) -> None:
    """The hot loop of reading a long run: appends inlined on purpose."""
    tags = rec.get("g")
    step = rec.get("s")
    nan = float("nan")
    for name, value in (rec.get("v") or {}).items():
        key = _series_key(name, tags) if tags else name
        series = metrics.get(key)
        if series is None:
            series = metrics[key] = Series(name=name, tags=dict(tags or {}))
        series.steps.append(step)
        series.values.append(nan if value is None else value)
        series.times.append(t)
        series.attempts.append(attempt)
        series.ranks.append(rank)


def _add(data: RunData, rec: Record, attempt: int, rank: int) -> None:
    kind, t = rec.get("k"), float(rec.get("t") or 0.0)
    if kind == "m":
        _add_row(data.metrics, rec, t, attempt, rank)
    elif kind == "st":
        duration = rec.get("d")
        if duration:
            series = data.step_times.get(rank)
            if series is None:
                series = data.step_times[rank] = rank_series("step_time", rank)
            _append(series, rec.get("s"), duration, t, attempt, rank)
            wait = rec.get("w")
            if wait is not None:
                data.data_wait_total[rank] = data.data_wait_total.get(rank, 0.0) + wait
                waits = data.data_wait.get(rank)
                if waits is None:
                    waits = data.data_wait[rank] = rank_series("data_wait", rank)
                _append(waits, rec.get("s"), wait, t, attempt, rank)
                if len(waits.values) > 2 * DATA_WAIT_TAIL:
                    _trim(waits)
            for field, name in (("n", "samples_per_second"), ("tok", "tokens_per_second")):
                if rec.get(field):
                    key = f"{name}{{rank={rank}}}"
                    tput = data.throughput.get(key)
                    if tput is None:
                        tput = data.throughput[key] = rank_series(name, rank)
                    _append(tput, rec.get("s"), rec[field] / duration, t, attempt, rank)
    elif kind == "x":
        attrs = rec.get("a") or {}
        key = _series_key(rec.get("n", "?"), {k: str(v) for k, v in attrs.items()})
        found = data.system.get(key)
        if found is None:
            found = data.system[key] = Series(
                name=rec.get("n", "?"), tags={k: str(v) for k, v in attrs.items()}
            )
            found.tags["unit"] = str(rec.get("u", ""))
        _append(found, None, rec.get("v"), t, attempt, rank)
    elif kind == "s":
        data.phases.append({**rec, "attempt": attempt, "rank": rank})
    elif kind == "l":
        data.logs.append(
            {
                "time": t,
                "level": rec.get("lvl", "INFO"),
                "message": rec.get("msg", ""),
                "traceback": (rec.get("a") or {}).get("exception.stacktrace"),
                "attributes": rec.get("a") or {},
                "attempt": attempt,
                "rank": rank,
            }
        )
    elif kind == "e":
        event = {
            "time": t,
            "name": rec.get("n"),
            "attributes": rec.get("a") or {},
            "body": rec.get("b"),
            "attempt": attempt,
            "rank": rank,
        }
        data.events.append(event)
        if event["name"] == Event.CHECKPOINT_SAVED:
            a: dict[str, Any] = rec.get("a") or {}
            data.checkpoints.append(
                {
                    "step": a.get(Attr.STEP),
                    "path": a.get(Attr.CHECKPOINT_PATH),
                    "size_bytes": a.get(Attr.CHECKPOINT_SIZE),
                    "time": t,
                    "best": bool(a.get(Attr.CHECKPOINT_BEST)),
                    "metric": a.get(Attr.CHECKPOINT_METRIC),
                    "value": a.get(Attr.CHECKPOINT_METRIC_VALUE),
                    "attempt": attempt,
                    "rank": rank,
                }
            )
        elif event["name"] == Event.SYSTEM and isinstance(event["body"], dict):
            for name, value in event["body"].items():
                series = data.system.setdefault(name, Series(name=name, tags={"unit": ""}))
                _append(series, None, value, t, attempt, rank)
