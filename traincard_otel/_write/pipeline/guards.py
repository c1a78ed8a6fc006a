"""Guard rails: stop training on the anomalies a run names (``stop_on``), notify webhooks.

:class:`Guards` observes the events the converter emits (anomalies, stalls, lost and hung ranks,
failures), on the converter's thread. An event whose kind ``stop_on`` names trips the guard once:
:attr:`Guards.trigger` is set, which the adapters read at each step end (``Reporter.should_stop``)
to save a checkpoint and stop through the trainer's own control flow; the run then ends *stopped
early*. Each event of a kind ``notify_on`` names goes to the :class:`~.notify.Notifier`. Every
action (a stop asked for, the checkpoint saved after it, the run's end) is kept for the card.

A NaN judged on the converter's thread is found a drain later (up to ``JUDGE_PERIOD_S``: several
steps of a fast loop). So where ``stop_on`` names ``nan``, the reporter also hands a float it sees
NaN or infinite to :meth:`Guards.nonfinite`, on the training thread: where the ``nonfinite`` rule
would flag it, the guard trips there and then (the anomaly's notice still comes from the rule).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

from opentelemetry.util.types import AnyValue

from ..._analysis.anomalies import NONFINITE_ROLES, AnomalyRules, nonfinite_message, role
from ..._config import STOP_KINDS, Settings
from ..._schema import Attr, Event
from ..._schema.anomaly_kinds import AnomalyKind
from ..._schema.keys import series_key
from ..._types import JsonObject, Reported
from .notify import Notifier

# The event each kind comes from (an anomaly's kind is in its attributes).
_EVENT_KINDS: Final = {
    Event.STALL_STARTED: "stall",
    Event.RANK_LOST: "rank_lost",
    Event.GANG_RANK_HUNG: "rank_hung",
    Event.GANG_FIRST_FAILURE: "failure",
    Event.RUN_FAILED: "failure",
}
_MAX_ACTIONS: Final = 50
_MAX_JUDGED_NAMES: Final = 1000


# What a training rank sends where a Metaflow gang node's step process (the launcher) started it:
# what only the rank sees. The launcher sends the rest (failures, hung and lost ranks, the end).
RANK_UNDER_LAUNCHER_KINDS: Final = frozenset((*STOP_KINDS, "stopped_early"))


def notified_kinds(settings: Settings, *, under_launcher: bool) -> frozenset[str] | None:
    """The kinds this process notifies (None: every kind)."""
    wanted = frozenset(settings.notify_on) or None
    if not under_launcher:
        return wanted
    return RANK_UNDER_LAUNCHER_KINDS & wanted if wanted is not None else RANK_UNDER_LAUNCHER_KINDS


class Trigger(NamedTuple):
    """What tripped the guard."""

    kind: str
    step: int | None
    value: float | None
    message: str
    t: float


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value == value and value >= 0 else None


class Guards:
    """The armed rules of one process, what tripped them and what was done (see the module)."""

    def __init__(
        self,
        settings: Settings,
        *,
        emit: Callable[[str, Mapping[str, Reported]], None],
        notifier: Notifier | None,
        rank: int,
        run: str | None,
        card: str | None,
    ) -> None:
        """``emit`` records a lifecycle event; ``notifier`` None: this process sends nothing (a
        rank other than the gang's first, or no ``notify``); ``run``/``card`` go in each notice."""
        self.stop_on = frozenset(settings.stop_on)
        self.notify_on = settings.notify_on
        self.notifier = notifier
        self._emit, self._rank, self._run, self._card = emit, rank, run, card
        self.trigger: Trigger | None = None  # set once; read by the training thread
        # The reporter checks floats for NaN on the training thread only where the rule would judge them.
        self.stops_on_nonfinite = (
            AnomalyKind.NAN in self.stop_on and AnomalyRules.parse(settings.anomalies) is not None
        )
        self._judged: dict[tuple[str, str | None], bool] = {}  # (name, phase) -> the rule judges it
        self._trip_lock = threading.Lock()  # the training thread and the converter's may trip at once
        self.checkpoint: str | None = None
        self.actions: list[JsonObject] = []
        self._told_ranks: set[tuple[str, int]] = set()

    # -- what happens --------------------------------------------------------------------------
    def observe(self, t: float, name: str | None, body: AnyValue, attributes: Mapping[str, AnyValue]) -> None:
        """An event the converter emitted (only the watched ones matter)."""
        if name == Event.ANOMALY:
            kind = str(attributes.get(Attr.ANOMALY_KIND, ""))
        else:
            found = _EVENT_KINDS.get(name or "")
            if found is None:
                return
            kind = found
        step = _int(attributes.get(Attr.STEP))
        value = attributes.get(Attr.ANOMALY_VALUE)
        value = float(value) if isinstance(value, (int, float)) else None
        rank = _int(attributes.get(Attr.RANK, attributes.get(Attr.LOST_RANK, self._rank)))
        if name == Event.RUN_FAILED:
            message = f"{attributes.get(Attr.EXCEPTION_TYPE)}: {attributes.get(Attr.EXCEPTION_MESSAGE)}"
        elif isinstance(body, str):
            message = body
        elif name == Event.STALL_STARTED:
            message = f"no step progress for {float(attributes.get(Attr.STALL_IDLE_S) or 0):.0f} s"  # type: ignore[arg-type]
        elif kind in ("rank_lost", "rank_hung"):
            message = f"rank {rank} stopped heart-beating"
        else:
            message = kind.replace("_", " ")
        if kind in ("failure", "rank_hung", "rank_lost") and rank is not None:
            if (kind, rank) in self._told_ranks:  # the same rank's failure seen twice (event, sibling)
                return
            self._told_ranks.add((kind, rank))
        self.notify(kind, message, step=step, rank=rank, value=value)
        if kind in self.stop_on and self.trigger is None:
            self._trip(Trigger(kind, step, value, message, t))

    def nonfinite(
        self, name: str, value: float, step: int | None, phase: str | None, tags: Mapping[str, str] | None
    ) -> None:
        """A float reported NaN or infinite (the training thread, while :attr:`stops_on_nonfinite`):
        trip now where the ``nonfinite`` rule judges the metric, as it would a drain later."""
        if self.trigger is not None:
            return
        key = (name, phase)
        judged = self._judged.get(key)
        if judged is None:
            judged = isinstance(name, str) and role(name, phase) in NONFINITE_ROLES
            if len(self._judged) < _MAX_JUDGED_NAMES:
                self._judged[key] = judged
        if judged:
            try:
                series = series_key(name, tags)  # as the rule names it
            except (TypeError, AttributeError):  # tags the converter rejects
                series = name
            message = nonfinite_message(series, value, step)
            self._trip(Trigger(AnomalyKind.NAN, step, float(value), message, time.time()))

    def reported(
        self,
        values: Mapping[str, Reported],
        step: int | None,
        phase: str | None,
        tags: Mapping[str, str] | None,
    ) -> None:
        """Scalars reported together (the training thread, while :attr:`stops_on_nonfinite`)."""
        try:
            items = values.items() if isinstance(values, dict) else dict(values).items()
        except (TypeError, ValueError):  # not a mapping: the converter counts and reports it
            return
        for name, value in items:
            # NaN and infinity minus themselves are NaN, which is true; a finite float gives 0.0
            if isinstance(value, float) and value - value:
                self.nonfinite(name, value, step, phase, tags)

    def rank_ended(self, rank: int, step: int | None, how: str) -> None:
        """Another rank of this node ended badly (seen by the sibling watch)."""
        if ("failure", rank) not in self._told_ranks:
            self._told_ranks.add(("failure", rank))
            self.notify("failure", f"rank {rank} {how}", step=step, rank=rank)

    def stop_requested(self, kind: str, message: str, step: int | None) -> None:
        """Training stops for a reason found elsewhere (another rank's rule): trip, if not yet."""
        if self.trigger is None:
            self._trip(Trigger(kind, step, None, message, time.time()))

    def _trip(self, trigger: Trigger) -> None:
        with self._trip_lock:
            if self.trigger is not None:
                return
            self.trigger = trigger
        self._act("stop requested", trigger.t, step=trigger.step, detail=trigger.message)
        attrs: dict[str, Reported] = {Attr.GUARD_TRIGGER: trigger.kind, Attr.STEP: trigger.step or -1}
        if trigger.value is not None:
            attrs[Attr.ANOMALY_VALUE] = trigger.value
        self._emit(Event.GUARD_STOP_REQUESTED, attrs)

    def checkpointed(self, path: str, step: int | None) -> None:
        """A checkpoint was saved; the first after a trip is the one training stopped with."""
        if self.trigger is not None and self.checkpoint is None:
            self.checkpoint = path
            self._act("checkpoint saved", time.time(), step=step, detail=path)

    def end_status(self, status: str) -> str:
        """The run's final status: a run that would have finished after a trip stopped early."""
        return "stopped_early" if status == "finished" and self.trigger is not None else status

    def ended(self, status: str, step: int | None) -> dict[str, Reported]:
        """The run ended with ``status``: note it, notify, and return the end event's attributes."""
        attrs: dict[str, Reported] = {}
        trigger = self.trigger
        if status == "stopped_early" and trigger is not None:
            attrs = {Attr.GUARD_TRIGGER: trigger.kind, Attr.GUARD_REASON: trigger.message}
            attrs[Attr.GUARD_TRIGGER_STEP] = trigger.step if trigger.step is not None else -1
            attrs[Attr.STEP] = step if step is not None else -1
            if self.checkpoint is not None:
                attrs[Attr.CHECKPOINT_PATH] = self.checkpoint
            self._act("stopped early", time.time(), step=step, detail=trigger.message)
            where = f"; checkpoint {self.checkpoint}" if self.checkpoint else ""
            self.notify("stopped_early", f"stopped early at step {step}: {trigger.message}{where}", step=step)
        elif status != "failed":  # a failure was notified when it happened
            self.notify("run_end", f"run {status} at step {step}", step=step, value=None, status=status)
        return attrs

    def _act(self, action: str, t: float, *, step: int | None, detail: str) -> None:
        trigger = self.trigger.kind if self.trigger is not None else None
        if len(self.actions) < _MAX_ACTIONS:
            self.actions.append(
                {"action": action, "trigger": trigger, "step": step, "time": t, "detail": detail}
            )

    def notify(
        self,
        kind: str,
        message: str,
        *,
        step: int | None,
        rank: int | None = None,
        value: float | None = None,
        status: str | None = None,
    ) -> None:
        notifier = self.notifier
        if notifier is None or not notifier.wants(kind):
            return
        where = f"{self._run} " if self._run else ""
        at = f"step {step}" if step is not None else "no step yet"
        who = f", rank {rank}" if rank is not None else ""
        fields: dict[str, Reported] = {
            "run": self._run,
            "step": step,
            "rank": self._rank if rank is None else rank,
            "value": value,
            "card": self._card,
            "time": time.time(),
        }
        if status is not None:
            fields["status"] = status
        notifier.notify(kind, f"traincard: {kind.replace('_', ' ')} in {where}({at}{who}): {message}", fields)

    # -- what the card shows -------------------------------------------------------------------
    def status_fields(self) -> JsonObject:
        """The armed rules, the actions taken and the notification counts (never a URL)."""
        trigger = self.trigger
        return {
            "stop_on": sorted(self.stop_on),
            "notify_on": list(self.notify_on),
            "notifications": self.notifier.status() if self.notifier is not None else None,
            "trigger": trigger._asdict() if trigger is not None else None,
            "checkpoint": self.checkpoint,
            "actions": list(self.actions),
        }
