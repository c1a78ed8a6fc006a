"""Every counter of telemetry loss in one place: dropped, rejected, write errors, pending rows.

Each rank's ``state.json`` may carry ``dropped`` / ``hot_path_overflow`` (records the full buffer
dropped), ``rejected`` (values refused, by reason) and ``store_health`` (the store writer's errors
and backlog). Every field is read defensively: absent or malformed means not shown.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..._data.rundata import RunData
from .contract import BannerRow, HealthSection, StoreHealthTotalSection

RECENT_ERROR_S = 300.0  # a write error this recent (at the run's latest time) raises a banner
TOP_REASONS = 5


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return int(value)


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def _rejected(data: RunData) -> dict[str, int]:
    out: dict[str, int] = {}
    for st in data.states:
        rejected = st.get("rejected")
        if not isinstance(rejected, Mapping):
            continue
        for reason, n in rejected.items():
            count = _int(n)
            if count:
                out[str(reason)] = out.get(str(reason), 0) + count
    return out


def _store(data: RunData) -> StoreHealthTotalSection:
    """The ranks' ``store_health`` objects added up; the newest last error wins."""
    found = False
    errors = pending = 0
    retrying = False
    last: tuple[float, str] | None = None
    last_no_time: str | None = None
    for st in data.states:
        sh = st.get("store_health")
        if not isinstance(sh, Mapping):
            continue
        found = True
        errors += _int(sh.get("write_errors")) or 0
        pending += _int(sh.get("pending_rows")) or 0
        retrying = retrying or sh.get("retrying") is True
        text, at = sh.get("last_error"), _float(sh.get("last_error_at"))
        if isinstance(text, str) and text:
            if at is None:
                last_no_time = last_no_time or text
            elif last is None or at > last[0]:
                last = (at, text)
    if not found:
        return {}
    out: StoreHealthTotalSection = {"write_errors": errors, "pending_rows": pending, "retrying": retrying}
    if last is not None:
        out["last_error_at"], out["last_error"] = last
    elif last_no_time is not None:
        out["last_error"] = last_no_time
    return out


def loss_counters(data: RunData) -> HealthSection:
    """The payload's ``health`` object (``docs/card-payload.md``); keys absent when not recorded."""
    dropped = {str(k): int(v) for k, v in (data.stats.get("dropped") or {}).items() if _int(v) is not None}
    rejected = _rejected(data)
    out: HealthSection = {"dropped": dropped, "dropped_total": sum(dropped.values())}
    if any(isinstance(st.get("rejected"), Mapping) for st in data.states):
        top = sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_REASONS]
        out["rejected_total"] = sum(rejected.values())
        out["rejected_top"] = [[reason, n] for reason, n in top]
    for key, value in _store(data).items():
        out[key] = value  # type: ignore[literal-required]  # the totals are health fields
    return out


def store_health_banner(data: RunData, at: float) -> BannerRow | None:
    """A ``store`` banner while writes to the store fail: errors counted and the last one recent."""
    store = _store(data)
    errors = store.get("write_errors", 0)
    last_at = store.get("last_error_at")
    if not errors or last_at is None or at - last_at > RECENT_ERROR_S:
        return None
    text = f"{errors} store write error(s); last: {str(store.get('last_error') or '?')[:300]}"
    if store.get("pending_rows"):
        text += f"; {store['pending_rows']} rows waiting to be written"
    if store.get("retrying"):
        text += " (retrying)"
    return {"kind": "store", "text": text}
