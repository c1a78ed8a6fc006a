"""Reading what a Hugging Face Trainer logged from ``state.log_history``, where ``Trainer.log``
appends each dict (with its step) just before ``on_log``: the reporter's background thread reads
it as a metric source, so logging costs the training thread nothing (an ``on_log`` tap cost about
10 µs a step when logging every step)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from itertools import chain

from .._types import Reported

#: What a Trainer logs: one dict per ``Trainer.log`` call (its step under ``"step"``), holding
#: whatever the Trainer and the user's callbacks logged.
LogHistory = list[dict[str, Reported]]

#: A logged dict read as a report: (values, step, phase), as a metric source returns it.
LoggedReport = tuple[dict[str, Reported], Reported, str]

_NUMBER = {float, int}


def numeric(logs: Mapping[str, object]) -> dict[str, float]:
    """The numbers of a logged dict (not booleans)."""
    return {k: v for k, v in logs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class _Cursor:
    """The log history followed and the next entry to read, replaced as one object: the source
    may be mid-read when :meth:`LogHistoryReader.follow` moves to a new history."""

    __slots__ = ("history", "next")

    def __init__(self, history: LogHistory, next: int) -> None:
        self.history, self.next = history, next


class LogHistoryReader:
    """The dicts appended to a Trainer's log history since the last read, as reports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cursor = _Cursor([], 0)
        self._unread: list[LoggedReport] = []  # read by report_eval, for the source
        self._eval_keys: dict[tuple[str, ...], bool] = {}  # a logged dict's names -> any eval_ metric

    def follow(self, history: LogHistory) -> None:
        """Read what is appended to ``history`` (a ``TrainerState.log_history``) from now on; what it
        holds already (a resumed run's) was reported by the run that logged it."""
        self._cursor = _Cursor(history, len(history))  # one assignment: the source may be mid-read

    def take(self, *, hold_eval: bool) -> list[LoggedReport]:
        """What was logged since the last read; with ``hold_eval``, not from the first dict with
        ``eval_`` metrics on (an eval phase is open: its metrics are reported inside it)."""
        with self._lock:
            reports, self._unread = self._unread, []
            return reports + self._read(hold_eval=hold_eval)

    def report_eval(self, report: Callable[[dict[str, Reported], Reported, str], object]) -> None:
        """Pass the eval metrics logged and not read yet to ``report``, now, on the calling thread;
        the train metrics are kept for :meth:`take`, which times them at their step's end."""
        with self._lock:  # held while reporting: a concurrent take() reports what follows after
            for values, step, phase in self._read(hold_eval=False):
                if phase == "eval":
                    report(values, step, phase)
                else:
                    self._unread.append((values, step, phase))

    def _read(self, *, hold_eval: bool) -> list[LoggedReport]:
        cursor = self._cursor
        history, start = cursor.history, cursor.next
        end = len(history)  # read after the end: an eval dict up to there was logged in its phase
        reports: list[LoggedReport] = []
        for entry in history[start:end]:
            values = dict(entry)
            step = values.pop("step", None)
            keys = tuple(values)
            evaluating = self._eval_keys.get(keys)
            if evaluating is None:  # a Trainer logs a few sets of names, over and over
                if len(self._eval_keys) > 64:
                    self._eval_keys.clear()
                evaluating = self._eval_keys[keys] = any(k.startswith("eval_") for k in keys)
            if evaluating and hold_eval:
                break
            reports.append((values, step, "eval" if evaluating else "train"))
        cursor.next = start + len(reports)
        # Numbers only: one pass over all the values in the common case.
        if not set(map(type, chain.from_iterable(values.values() for values, _s, _p in reports))) <= _NUMBER:
            reports = [(numeric(values), step, phase) for values, step, phase in reports]
        return [report for report in reports if report[0]]
