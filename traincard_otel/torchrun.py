"""``python -m traincard_otel.torchrun ARGS``: ``torch.distributed.run`` keeping the agent's record.

Takes exactly ``torchrun``'s arguments and runs its ``main`` in this process. What the elastic
agent knows and otherwise only prints (each failed worker's global rank, local rank, pid, exit
code or signal, the time it ended, its ``@record`` error file with the traceback) is written as
one object, ``elastic/node-<node_rank>-<pid>.json``, to the node's store (``TRAINCARD_STORE``,
exported by ``@traincard``), once when the agent starts and again when it ends. The card names
the first failed rank from it, with its signal, rather than guessing from a missing heartbeat.

Nothing else changes: without a store, or with plain ``torchrun``, training runs the same.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from ._config import resolve
from ._safety import report_internal_error
from ._store.layout import ELASTIC_PREFIX
from ._types import JsonObject
from ._write.telemetry import collectives

if TYPE_CHECKING:
    from ._store.backends import Backend


def _failures(exc: BaseException) -> list[JsonObject]:
    out = []
    for rank, failure in sorted((getattr(exc, "failures", None) or {}).items()):
        data = failure.error_file_data if isinstance(failure.error_file_data, dict) else {}
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        extra = (message or {}).get("extraInfo") or {}
        exitcode = int(failure.exitcode)
        out.append(
            {
                "rank": int(rank),
                "local_rank": int(failure.local_rank),
                "pid": int(failure.pid),
                "exitcode": exitcode,
                "signal": failure.signal_name() if exitcode < 0 else None,
                "time": float(failure.timestamp),
                "message": str((message or {}).get("message") or failure.message)[:2000],
                "traceback": extra.get("py_callstack"),
                "error_file": None if failure.error_file == "<N/A>" else failure.error_file,
            }
        )
    return out


class _Record:
    def __init__(self, node_rank: int, nnodes: str, nproc: str) -> None:
        self.backend: Backend | None = None
        spec = os.environ.get("TRAINCARD_STORE", "").strip()
        if spec:
            from ._store.backends import backend_from_spec

            self.backend = backend_from_spec(spec)
        self.name = f"{ELASTIC_PREFIX}node-{node_rank}-{os.getpid()}.json"
        self.body: JsonObject = {
            "node_rank": node_rank,
            "nnodes": nnodes,
            "nproc_per_node": nproc,
            "host": socket.gethostname(),
            "agent_pid": os.getpid(),
            "attempt": int(os.environ.get("TRAINCARD_ATTEMPT", "0") or 0),
            "started_at": time.time(),
            "ended_at": None,
            "exit_code": None,
            "failures": [],
            # torch's agent waits this long at its exit barrier once its own workers succeeded.
            "exit_barrier_timeout_s": 300.0,
        }

    def write(self) -> None:
        if self.backend is None:
            return
        try:
            self.backend.write(self.name, json.dumps(self.body).encode())
        except Exception as exc:  # the record must never stop training
            report_internal_error("torchrun agent record", exc)


def main(argv: list[str] | None = None) -> int:
    """Run ``torch.distributed.run`` with ``argv``; return its exit status."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    args = parse_args(sys.argv[1:] if argv is None else argv)  # type: ignore[no-untyped-call]
    if resolve().flight_recorder:  # the workers inherit it before they make their process groups
        collectives.enable()
    record = _Record(int(args.node_rank), str(args.nnodes), str(args.nproc_per_node))
    record.write()
    code = 0
    try:
        run(args)  # type: ignore[no-untyped-call]
    except ChildFailedError as exc:
        record.body["failures"] = _failures(exc)
        code = 1
        print(str(exc), file=sys.stderr)
    except BaseException as exc:
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
        record.body["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    finally:
        record.body["ended_at"] = time.time()
        record.body["exit_code"] = code
        record.write()
    return code


if __name__ == "__main__":
    sys.exit(main())
