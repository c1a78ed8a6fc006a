"""A child process is not a rank: DataLoader workers, pools and subprocesses report nothing themselves.

Two ways a child could start a second pipeline, and what stops each:

* **Fork** copies the parent's running pipeline, and the OTel SDK restarts its export threads in
  the child (``os.register_at_fork``): the metric reader would export the parent's last readings,
  frozen at fork time, and the child's exit hooks would write them into the parent's store. An
  after-fork hook hands the copy back to the parent: :meth:`Pipeline.leave_to_parent` makes it
  inert, :class:`ParentOnlyPeriodicReader` keeps its reader thread from restarting, and the store
  writer refuses to write from any process but its own
  (:class:`~traincard_otel._write.store.writer.StoreWriter`).
* **Spawn, forkserver, subprocess** start a fresh interpreter that inherits the environment, with
  the ``TRAINCARD_*`` settings in it. A process whose pipeline starts records itself in
  ``TRAINCARD_PARENT`` (its pid and its rank variables); a later process that finds another pid
  there, the same rank variables and no process group of its own is that process's child, and
  :func:`~traincard_otel._write.pipeline.registry.start` gives it no pipeline.

A child with its own rank identity is a rank: a launcher (torchrun, ``accelerate launch``,
``srun``, a ``@parallel`` node) sets rank variables of its own, and ``torch.multiprocessing.spawn``
workers initialise their process group themselves. What children print still reaches the card:
they write to the descriptors they inherited, which the parent's console capture reads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

from ..._identity import RANK_VARIABLES

ENV_PARENT = "TRAINCARD_PARENT"

_group_at_fork = False  # a forked child's process group is its parent's, not its own


class ParentOnlyPeriodicReader(PeriodicExportingMetricReader):
    """A periodic metric reader whose export thread lives in the process that made it.

    The SDK restarts the thread in a forked child, where it would export the parent's figures
    as they were at the fork, again and again, for as long as the child lives.
    """

    def _at_fork_reinit(self) -> None:
        return


def rank_variables(env: Mapping[str, str]) -> str:
    """The launcher-set rank variables of ``env``, as one comparable string."""
    return ";".join(f"{name}={env[name]}" for name in RANK_VARIABLES if name in env)


def claim() -> None:
    """Record this process as the one whose children are not ranks (inherited by every child).

    Called again at every flush: a framework may set rank variables in this process later
    (Lightning does before it starts its other ranks), and its children after that have them too.
    """
    marker = f"{os.getpid()} {rank_variables(os.environ)}"
    if os.environ.get(ENV_PARENT) != marker:
        os.environ[ENV_PARENT] = marker


def after_fork_in_child() -> None:
    """A forked child of a reporting process: a child of it whatever the parent's variables became."""
    global _group_at_fork
    _group_at_fork = _in_process_group()
    os.environ[ENV_PARENT] = f"{os.getppid()} {rank_variables(os.environ)}"


def _in_process_group() -> bool:
    if "torch" not in sys.modules:
        return False
    dist = getattr(sys.modules["torch"], "distributed", None)
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:  # a half-imported torch: no group
        return False


def parent_pid(env: Mapping[str, str] | None = None, pid: int | None = None) -> int | None:
    """The pid of the reporting process this one is a child of, or None if it may report itself."""
    env = os.environ if env is None else env
    owner, _, variables = env.get(ENV_PARENT, "").partition(" ")
    if not owner.isdigit() or int(owner) == (os.getpid() if pid is None else pid):
        return None
    if variables != rank_variables(env) or (_in_process_group() and not _group_at_fork):
        return None  # a launcher made it a rank, or it joined a process group itself
    return int(owner)
