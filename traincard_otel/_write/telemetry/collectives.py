"""Which collectives this rank entered last, from PyTorch's flight recorder (NCCL and gloo).

The recorder keeps a ring of the collectives each process group issued (``TORCH_FR_BUFFER_SIZE``
entries); :func:`enable` turns it on with a bounded ring unless the user chose a size, and
:func:`read` summarises it for a stalled rank's stack dump: the last collective entered (its
sequence number in the default group, so ranks can be compared) and the few before it. Read only
where ``torch.distributed`` is already imported and initialised, and never for longer than
``READ_TIMEOUT_S`` (a dump of an NCCL communicator in a bad state must not stop the watchdog).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import MutableMapping

from ..._types import JsonObject

BUFFER_ENTRIES = "2000"
RECENT = 8
READ_TIMEOUT_S = 2.0
_SIZE_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


def enable(env: MutableMapping[str, str] | None = None) -> bool:
    """Give the flight recorder a bounded ring unless a size is set already; True if it did. It
    takes effect for process groups made after this (and in child processes)."""
    env = os.environ if env is None else env
    if any(v in env for v in _SIZE_VARS):
        return False
    env["TORCH_FR_BUFFER_SIZE"] = BUFFER_ENTRIES
    return True


def _raw() -> bytes | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace_json", None) or getattr(c10d, "_dump_nccl_trace_json", None)
    if dump is None:
        return None
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(dump(True, False)), name="traincard-fr", daemon=True)
    reader.start()
    reader.join(READ_TIMEOUT_S)
    return out[0] if out else None


def _entry(e: JsonObject) -> JsonObject:
    backend, _, op = str(e.get("profiling_name") or "?").rpartition(":")
    return {
        "seq": int(e.get("collective_seq_id") or 0),
        "op": op,
        "backend": backend or None,
        "state": e.get("state"),
        "sizes": (e.get("input_sizes") or [])[:2],
    }


def summarise(data: JsonObject) -> JsonObject | None:
    """The default group's last collective entered and the ``RECENT`` before it; None if the
    recorder holds none (it is off)."""
    entries = [e for e in data.get("entries") or [] if not e.get("is_p2p")]
    default = [e for e in entries if (e.get("process_group") or [None, None])[1] == "default_pg"]
    entries = sorted(default or entries, key=lambda e: int(e.get("collective_seq_id") or 0))
    if not entries:
        return None
    recent = [_entry(e) for e in entries[-RECENT:]]
    return {"last": recent[-1], "recent": recent, "entries": len(entries)}


def read() -> JsonObject | None:
    """This rank's flight-recorder summary, or None where there is none to read."""
    raw = _raw()
    if not raw:
        return None
    return summarise(json.loads(raw))
