"""The baseline a run is compared with: found (the latest earlier good run of the same flow, or
the run the ``baseline`` setting names) and read once (:func:`load_baseline`)."""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict

from .._analysis.baseline import Baseline, main_metric
from .._config import baseline_spec
from .._data.rundata import RunData, Series
from .._types import Foreign
from .load.target import read
from .locate import tasks_of_step

#: How many runs of the flow the automatic baseline looks through, newest first.
BASELINE_SCAN_RUNS = 50


class _NoBaseline(Exception):
    """No baseline to read; the message is the card's note."""


_cache: OrderedDict[str, RunData] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 4


def load_baseline(
    current: str | None,
    spec: str | None = "auto",
    *,
    slim: bool = False,
    timeout_s: float | None = None,
) -> Baseline | None:
    """The baseline of the task ``current`` (a pathspec ``Flow/run/step/task``, or None outside
    Metaflow) for the setting ``spec`` (see :data:`traincard_otel.environment_variables.TRAINCARD_BASELINE`);
    None when ``spec`` is ``none``. Never raises: a missing or unreadable baseline is a
    :class:`Baseline` without data whose ``note`` says why.

    A baseline is a finished run, so what was read is kept (the last few, by pathspec) for the next
    call. ``slim`` keeps only what the card draws and compares (the training loss, the eval
    metrics and the lowest rank's step times), for a process that holds it for a whole run.
    ``timeout_s`` bounds the wait (a card render has a deadline of its own): past it, the lookup
    is left to finish on its daemon thread and the answer is a note.
    """
    spec = baseline_spec(spec)
    if spec == "none":
        return None
    if timeout_s is None:
        return _load_baseline(current, spec, slim)
    box: list[Baseline] = []
    worker = threading.Thread(
        target=lambda: box.append(_load_baseline(current, spec, slim)), name="traincard-baseline", daemon=True
    )
    worker.start()
    worker.join(timeout_s)
    if box:
        return box[0]
    what = "the latest earlier good run" if spec == "auto" else spec
    return Baseline(label=spec, note=f"baseline {what} could not be read: not within {timeout_s:g} s")


def _load_baseline(current: str | None, spec: str, slim: bool) -> Baseline:
    try:
        label, target, run_id, data = _find(current, spec)
    except _NoBaseline as exc:
        return Baseline(label=spec, note=str(exc))
    except Exception as exc:
        return Baseline(label=spec, note=f"baseline {spec} could not be read: {_reason(exc)}")
    try:
        data = data if data is not None else _read_cached(label, target)
    except _NoBaseline as exc:
        return Baseline(label=label, note=str(exc), run_id=run_id)
    except Exception as exc:
        return Baseline(
            label=label, note=f"baseline {label} could not be read: {_reason(exc)}", run_id=run_id
        )
    return Baseline(label=label, data=_slim(data) if slim else data, run_id=run_id)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def _read_cached(label: str, target: object) -> RunData:
    with _cache_lock:
        if label in _cache:
            _cache.move_to_end(label)
            return _cache[label]
    data, _pathspec = read(target)
    if not data.states and not data.metrics:
        raise _NoBaseline(f"baseline {label} could not be read: it holds no traincard telemetry")
    with _cache_lock:
        _cache[label] = data
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return data


def _slim(data: RunData) -> RunData:
    main = main_metric(data.metrics)
    keep = {k: v for k, v in data.metrics.items() if k == main or k.startswith("eval_")}
    times: dict[int, Series] = (
        {min(data.step_times): data.step_times[min(data.step_times)]} if data.step_times else {}
    )
    return RunData(source=data.source, metrics=keep, step_times=times, states=data.states[:1])


Found = tuple[str, object, str | None, RunData | None]


def _find(current: str | None, spec: str) -> Found:
    """(label, what :func:`load` reads, Metaflow run id or None, its data if already read) for
    the setting ``spec``."""
    if spec != "auto" and (re.match(r"^(s3|gs|az|file|metaflow)://", spec) or os.path.isdir(spec)):
        return spec, spec, None, None
    if current is None:
        if spec == "auto":
            raise _NoBaseline(
                "no baseline: this run is not a Metaflow task (name one with the baseline setting)"
            )
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*/", spec):
            raise _NoBaseline(
                f"baseline {spec} could not be read: no such folder, and not a Metaflow pathspec"
            )
    from .._optional import require

    metaflow = require("metaflow", "metaflow")
    if spec == "auto":
        assert current is not None
        return _latest_good(metaflow, current)
    return _named(metaflow, current, spec)


def _named(metaflow: Foreign, current: str | None, spec: str) -> Found:
    """A baseline the user named: ``Flow/run/step/task``, ``Flow/run/step``, ``Flow/run`` or a run id
    (the step and flow of ``current`` fill in what is left out)."""
    parts = spec.strip("/").split("/")
    mine = current.split("/") if current else []
    if len(parts) == 1 and mine:
        parts = [mine[0], parts[0]]
    if len(parts) == 2 and mine:
        parts = [*parts, mine[2]]
    if len(parts) not in (3, 4):
        raise _NoBaseline(f"baseline {spec} could not be read: give Flow/run/step[/task] or a run id")
    if len(parts) == 4:
        task = metaflow.Task("/".join(parts), _namespace_check=False)
    else:
        step = metaflow.Step("/".join(parts), _namespace_check=False)
        task = _pick_task(step, current)
        if task is None:
            raise _NoBaseline(f"baseline {spec} could not be read: the step has no task")
    return task.pathspec, task, task.pathspec.split("/")[1], None


def _pick_task(step: Foreign, current: str | None) -> Foreign:
    """The task of ``step`` to compare with: the only one, a gang's control task, or in a foreach
    the one at the same index as ``current``'s."""
    tasks: list[Foreign] = [f.target for f in tasks_of_step(step)]  # metaflow Tasks
    if len(tasks) <= 1:
        return tasks[0] if tasks else None
    if current is not None:
        from .._optional import require

        metaflow = require("metaflow", "metaflow")
        try:
            index = metaflow.Task(current, _namespace_check=False).index
            same = [t for t in tasks if t.index == index]
            if same:
                return same[0]
        except Exception:  # the current task is not in the metadata yet: take the first
            pass
    return sorted(tasks, key=lambda t: t.id)[0]


def _latest_good(metaflow: Foreign, current: str) -> Found:
    """The newest run of ``current``'s flow, other than ``current``'s own and started before it,
    in the namespace runs of this process are in, whose same step succeeded and holds telemetry."""
    flow_name, run_id, step_name, _task_id = current.split("/")
    try:
        from metaflow.util import resolve_identity

        namespace: str | None = resolve_identity()
    except Exception:  # no user known: every run of the flow
        namespace = None
    try:
        mine = metaflow.Run(f"{flow_name}/{run_id}", _namespace_check=False).created_at
    except Exception:
        mine = None
    flow = (
        metaflow.Flow(flow_name, _current_namespace=namespace)
        if namespace
        else metaflow.Flow(flow_name, _namespace_check=False)
    )
    failed: Exception | None = None
    for n, run in enumerate(flow):
        if n >= BASELINE_SCAN_RUNS:
            break
        if run.id == run_id or (mine is not None and run.created_at > mine):
            continue
        try:
            step = run[step_name]
        except KeyError:  # a run that failed before the step, or one without it
            continue
        try:
            task = _pick_task(step, current)
            if task is None or not task.successful:
                continue
            data = _read_cached(task.pathspec, task)
        except _NoBaseline:  # the step ran without telemetry then
            continue
        except Exception as exc:  # one unreadable run does not hide the earlier ones
            failed = exc
            continue
        return task.pathspec, task, run.id, data
    if failed is not None:
        raise _NoBaseline(
            f"no earlier successful run of {flow_name}/{step_name} could be read: {_reason(failed)}"
        )
    raise _NoBaseline(f"no earlier successful run of {flow_name}/{step_name}")
