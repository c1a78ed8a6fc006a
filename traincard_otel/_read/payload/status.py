"""The status bar: state, phase, step and epoch progress, elapsed time, ETA and cost."""

from __future__ import annotations

from ..._data.rundata import RunData
from .contract import RunCostSection, RunSection
from .kind import TRAINING, RunKind


def _eta(data: RunData, step: int | None, max_steps: int | None) -> float | None:
    if step is None or not max_steps or step >= max_steps:
        return None
    series = data.step_times.get(0)
    if series is None or len(series) < 2:
        return None
    recent = [
        d
        for d, a in zip(series.values[-50:], series.attempts[-50:], strict=False)
        if a == series.attempts[-1]
    ]
    if not recent:
        return None
    per_step = sorted(recent)[len(recent) // 2]
    return per_step * (max_steps - step)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def epoch_progress(
    epoch: object, num_epochs: object, step: object, max_steps: object
) -> tuple[float | None, float | None]:
    """(epoch, epochs in the run), the epoch never above the total.

    A run bounded by ``max_steps`` ends after ``epoch / step * max_steps`` epochs whatever epoch
    count was configured (the HF Trainer's ``num_train_epochs`` stays at its default 3 when
    ``max_steps`` is set): that figure wins when it differs from the configured one by more than
    one step's worth of an epoch.
    """
    e, total, s, m = _number(epoch), _number(num_epochs), _number(step), _number(max_steps)
    if e is not None and e > 0 and s and m and s > 0:
        implied = e * m / s
        if total is None or abs(implied - total) > max(e / s, 0.01 * total):
            total = round(implied, 2)
    if e is not None and total is not None and e > total:
        e = total
    return e, total


def _cost(hourly: float, nodes: int, elapsed: float, eta: float | None) -> RunCostSection:
    """The price is per node (machine): a gang costs it times its nodes."""
    rate = hourly * nodes
    so_far = rate * elapsed / 3600
    return {"hourly": rate, "nodes": nodes, "so_far": so_far, "at_eta": so_far + rate * (eta or 0) / 3600}


def run_status(
    data: RunData, now: float, hourly_cost: float | None = None, kind: RunKind = TRAINING
) -> RunSection:
    """The ``run`` object of the payload (``docs/card-payload.md``)."""
    st = data.status
    progress = st.get("progress") or {}
    started = min((s.get("started_at") or now for s in data.states), default=now)
    updated = max((s.get("updated_at") or 0 for s in data.states), default=now)
    running = st.get("status") == "running"
    step = st.get("step", progress.get("step"))
    max_steps = progress.get("max_steps")
    elapsed = (now if running else updated) - started
    eta = _eta(data, step, max_steps) if running else None
    hourly = st.get("hourly_cost") or hourly_cost
    epoch, num_epochs = epoch_progress(progress.get("epoch"), progress.get("num_epochs"), step, max_steps)
    return {
        "title": data.source,
        "status": st.get("status", "unknown"),
        "phase": st.get("phase") or "",
        "step": step,
        "max_steps": max_steps,
        "epoch": epoch,
        "num_epochs": num_epochs,
        "started_at": started,
        "updated_at": updated,
        "elapsed_s": elapsed,
        "eta_s": eta,
        "batch_size": progress.get("batch_size"),
        "world_size": progress.get("world_size") or st.get("world_size"),
        "attempt": st.get("attempt", 0),
        "restarts": st.get("restarts", 0),
        "heartbeat_age_s": (now - st["heartbeat_at"]) if running and st.get("heartbeat_at") else None,
        "cost": _cost(hourly, max(len(data.gang.get("nodes") or []), 1), elapsed, eta) if hourly else None,
        "kind": kind.name,
        "unit": kind.unit,
        "metrics_title": kind.title,
    }
