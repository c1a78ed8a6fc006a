"""Webhook notifications: a Slack-compatible JSON post per event, from a thread of their own.

Posting never runs on the thread that noticed the event: :meth:`Notifier.notify` appends to a
bounded queue and returns. The thread posts each notice to every URL with a bounded timeout, and
:meth:`Notifier.close` waits for what is left at most as long as it is given (the shutdown
bound); the thread is a daemon, so a dead endpoint never holds the process. A kind notified less
than ``min_interval_s`` ago is not notified again (counted as suppressed). The URLs are secrets:
nothing here logs, stores or shows one; a failure is counted and named by its error type.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Final

from ..._types import JsonObject, Reported

logger = logging.getLogger("traincard_otel")

# Kinds that happen once per run: never rate-limited.
_ONCE: Final = frozenset({"stopped_early", "run_end"})
_QUEUE_CAP: Final = 100


def _json_value(value: Reported) -> Reported:
    """JSON has no NaN or infinity: those go as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class Notifier:
    """Posts notices to webhooks; ``counts`` says how many were sent, failed, suppressed, dropped."""

    def __init__(
        self,
        urls: Sequence[str],
        kinds: frozenset[str] | None,
        *,
        timeout_s: float,
        min_interval_s: float = 60.0,
    ) -> None:
        """``kinds`` None: every kind; ``timeout_s`` bounds one post."""
        self._urls = tuple(urls)
        self._kinds, self._timeout_s, self._min_interval_s = kinds, timeout_s, min_interval_s
        self._last: dict[str, float] = {}
        self._pending: collections.deque[bytes] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.counts: dict[str, int] = {"sent": 0, "failed": 0, "suppressed": 0, "dropped": 0}
        self.errors: dict[str, int] = {}  # error type -> failed posts

    @property
    def targets(self) -> int:
        return len(self._urls)

    def wants(self, kind: str) -> bool:
        return self._kinds is None or kind in self._kinds

    def notify(self, kind: str, text: str, fields: Mapping[str, Reported]) -> bool:
        """Queue a notice of ``kind`` (False: not wanted, rate-limited or the queue is full)."""
        if not self.wants(kind):
            return False
        body = json.dumps(
            {"text": text, "kind": kind, **{k: _json_value(v) for k, v in fields.items()}},
            default=str,
        ).encode()
        now = time.monotonic()
        with self._lock:
            if self._closed:
                return False
            last = self._last.get(kind)
            if kind not in _ONCE and last is not None and now - last < self._min_interval_s:
                self.counts["suppressed"] += 1
                return False
            if len(self._pending) >= _QUEUE_CAP:
                self.counts["dropped"] += 1
                return False
            self._last[kind] = now
            self._pending.append(body)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="traincard-notify", daemon=True)
                self._thread.start()
            self._wake.notify()
        return True

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if not self._pending:
                    return
                body = self._pending.popleft()
                self._busy = True
            for i, url in enumerate(self._urls):
                self._post(i, url, body)
            with self._lock:
                self._busy = False
                self._wake.notify_all()

    def _post(self, index: int, url: str, body: bytes) -> None:
        request = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                response.read(1024)
            outcome = "sent"
        except Exception as exc:  # the message may hold the URL: only the error's type is named
            outcome = "failed"
            name = type(exc).__name__
            with self._lock:
                first = name not in self.errors
                self.errors[name] = self.errors.get(name, 0) + 1
            if first:
                logger.warning("traincard: a webhook notification failed (webhook %d: %s)", index + 1, name)
        with self._lock:
            self.counts[outcome] += 1

    def close(self, timeout_s: float) -> bool:
        """Let the queued notices go, waiting at most ``timeout_s``; True if all went."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            while (self._pending or self._busy) and self._thread is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.counts["dropped"] += len(self._pending)
                    self._pending.clear()
                    return False
                self._wake.wait(left)
        return True

    def status(self) -> JsonObject:
        """The counts, for the card (no URL)."""
        with self._lock:
            pending = len(self._pending) + self._busy  # still to go when this was written
            return {
                "webhooks": len(self._urls),
                **self.counts,
                "pending": pending,
                "errors": dict(self.errors),
            }
