"""sweep(target): the tasks of a foreach (or several runs) as one table, read from their summaries.

Each task's summary (its writers' merged, :mod:`traincard_otel._analysis.summary`) holds what a
comparison needs; a task without one (a store written before summaries existed) is read whole and
summarised here. :attr:`Sweep.runs` reads every task's telemetry, lazily.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import cast

from .._analysis.summary import task_summary
from .._optional import require
from .._types import Foreign, JsonObject, JsonValue
from .load.summaries import read_summary
from .locate import Found, TargetError, backend_for, has_store, metaflow_client, resolve, tasks_of_step
from .run import LoadedRun, load

#: Columns every row has, in order; hyperparameters and metrics follow.
FIXED_COLUMNS = ("pathspec", "status", "step", "duration_s", "goodput", "mfu")


class Sweep:
    """Several tasks compared: one row per task (:meth:`to_rows`, :meth:`to_pandas`, :meth:`to_arrow`).

    ``summaries`` maps each task's label (its pathspec, or its folder) to its summary; ``runs`` are
    the tasks as :func:`traincard_otel.load` reads them, read on first use.
    """

    def __init__(self, title: str, found: Sequence[Found]) -> None:
        self.title = title
        self._found = list(found)
        self._runs: dict[str, LoadedRun] = {}
        self.summaries: dict[str, JsonObject] = {}
        for item in self._found:
            self.summaries[item.label] = self._summary(item)
        joins = [label for label, s in self.summaries.items() if s.get("joins")]
        if joins and len(joins) < len(self.summaries):  # a join compares the branches; it is none
            self._found = [f for f in self._found if f.label not in joins]
            self.summaries = {k: v for k, v in self.summaries.items() if k not in joins}

    def _summary(self, item: Found) -> JsonObject:
        try:
            backend, _title = backend_for(item.target)
            stored = read_summary(backend)
        except Exception:  # no store to read a summary from: the whole run is read below
            stored = None
        if stored is not None:
            return stored
        run = self._load(item)
        return cast(JsonObject, dict(task_summary(run, run.insights, pathspec=item.label)))

    def _load(self, item: Found) -> LoadedRun:
        if item.label not in self._runs:
            self._runs[item.label] = load(item.target)
        return self._runs[item.label]

    @property
    def runs(self) -> list[LoadedRun]:
        """Every task's :class:`~traincard_otel._read.run.LoadedRun` (each read whole, once, on first use)."""
        return [self._load(item) for item in self._found]

    def __len__(self) -> int:
        return len(self._found)

    def __repr__(self) -> str:
        return f"Sweep({self.title!r}, {len(self)} tasks)"

    def to_rows(self) -> list[JsonObject]:
        """One dict per task: pathspec, status, step, duration_s, goodput, mfu, each
        hyperparameter under its own name, and ``<metric>.final`` / ``<metric>.best`` per metric."""
        return [_row(label, s) for label, s in self.summaries.items()]

    def to_pandas(self) -> Foreign:
        """:meth:`to_rows` as a ``pandas.DataFrame`` (``pip install 'traincard-otel[notebook]'``)."""
        pd = require("pandas", "notebook")
        return pd.DataFrame(self.to_rows())

    def to_arrow(self) -> Foreign:
        """:meth:`to_rows` as a ``pyarrow.Table`` (``pip install 'traincard-otel[store]'``); a column
        whose values mix types (a hyperparameter that is a number in one task, text in another)
        is text."""
        pa = require("pyarrow", "store")
        rows = self.to_rows()
        names = list(dict.fromkeys(k for r in rows for k in r))
        columns: dict[str, list[JsonValue]] = {n: [r.get(n) for r in rows] for n in names}
        for name, values in columns.items():
            kinds = {type(v) for v in values if v is not None}
            if len(kinds) > 1 and not kinds <= {int, float}:
                columns[name] = [None if v is None else str(v) for v in values]
        return pa.table(columns)


def _row(label: str, s: Mapping[str, JsonValue]) -> JsonObject:
    row: JsonObject = {"pathspec": str(s.get("pathspec") or label)}
    for key in FIXED_COLUMNS[1:]:
        row[key] = s.get(key)
    hp = s.get("hyperparameters")
    for name, value in hp.items() if isinstance(hp, dict) else []:
        row[name if name not in FIXED_COLUMNS else f"hp.{name}"] = value
    metrics = s.get("metrics")
    for name, m in sorted(metrics.items()) if isinstance(metrics, dict) else []:
        if isinstance(m, dict):
            row[f"{name}.final"] = m.get("last")
            row[f"{name}.best"] = m.get("best")
    return row


def _last_runs(flow_name: str, last: int) -> list[Found]:
    """The tasks of the training step of ``flow_name``'s last runs: the step with the most tasks
    with telemetry (a foreach's branches rather than the join that compares them), the earliest of
    equals."""
    metaflow = metaflow_client()
    found: list[Found] = []
    for n, run in enumerate(metaflow.Flow(flow_name)):
        if n >= last:
            break
        best: list[Found] = []
        for step in run:  # newest step first
            with_store = [t for t in tasks_of_step(step) if has_store(t.target)]
            if with_store and len(with_store) >= len(best):
                best = with_store
        found.extend(best)
    return found


def sweep(target: object, *, last: int | None = None) -> Sweep:
    """Compare several training tasks: the branches of a foreach, or a flow's recent runs.

    Args:
        target: a Metaflow step pathspec (``"Flow/run/step"``: every task of the step; ``latest``
            for the run), a flow name with ``last=N``, a folder of runs, or a list of targets
            (each a task pathspec, a ``metaflow.Task``, a store folder or URL).
        last: with a flow name, compare the training step of the flow's last ``last`` runs.

    Example::

        sw = traincard_otel.sweep("SweepFlow/latest/train")
        df = sw.to_pandas()            # one row per branch: lr, loss.final, loss.best, status...
        best = sw.runs[df["loss.best"].idxmin()]
    """
    if isinstance(target, (list, tuple)):
        found = [f for t in target for f in resolve(t)]
        title = f"{len(found)} runs"
    elif last is not None:
        if not isinstance(target, str) or "/" in target:
            raise TargetError(f"last={last} takes a flow name, not {target!r}")
        found = _last_runs(target, int(last))
        title = f"{target}: the last {last} runs"
    else:
        found = resolve(target)
        title = os.fspath(target) if isinstance(target, (str, os.PathLike)) else str(target)
    if not found:
        raise TargetError(f"no traincard telemetry in {target!r}")
    return Sweep(title, found)
