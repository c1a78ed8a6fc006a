"""Who is reporting: Metaflow task identity and distributed rank, as resource attributes."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class MetaflowIdentity:
    flow_name: str
    run_id: str
    step_name: str
    task_id: str
    retry_count: int
    origin_run_id: str | None
    ds_type: str | None = None
    ds_root: str | None = None

    @property
    def pathspec(self) -> str:
        return f"{self.flow_name}/{self.run_id}/{self.step_name}/{self.task_id}"

    @property
    def store_prefix(self) -> str:
        """The task's ``traincard`` folder inside the Metaflow datastore."""
        return f"{self.flow_name}/{self.run_id}/{self.step_name}/{self.task_id}/traincard"


@dataclasses.dataclass(frozen=True)
class RankIdentity:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    node_rank: int = 0


def _env_int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        raw = env.get(name, "").strip()
        if raw.lstrip("-").isdigit():
            return int(raw)
    return None


def detect_rank(env: Mapping[str, str] | None = None) -> RankIdentity:
    """Rank from torchrun/accelerate env vars, else from an initialised ``torch.distributed``."""
    env = os.environ if env is None else env
    rank = _env_int(env, "RANK", "SLURM_PROCID")
    world = _env_int(env, "WORLD_SIZE", "SLURM_NTASKS")
    local = _env_int(env, "LOCAL_RANK", "SLURM_LOCALID")
    node = _env_int(env, "GROUP_RANK", "NODE_RANK", "SLURM_NODEID")
    if rank is None and "torch" in sys.modules:
        dist = getattr(sys.modules["torch"], "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
    rank = rank or 0
    return RankIdentity(
        rank=rank,
        local_rank=local if local is not None else rank,
        world_size=max(world or 1, 1),
        node_rank=node or 0,
    )


def detect_metaflow() -> MetaflowIdentity | None:
    """The running Metaflow task, if this process is one (never imports metaflow itself)."""
    if "metaflow" not in sys.modules:
        return None
    try:
        from metaflow import current
    except ImportError:
        return None
    if not getattr(current, "is_running_flow", False) or not current.task_id:
        return None
    return MetaflowIdentity(
        flow_name=str(current.flow_name),
        run_id=str(current.run_id),
        step_name=str(current.step_name),
        task_id=str(current.task_id),
        retry_count=int(current.retry_count or 0),
        origin_run_id=current.origin_run_id,
    )


def resource_attributes(
    mf: MetaflowIdentity | None, rank: RankIdentity, service_name: str | None
) -> dict[str, Any]:
    """Resource attributes set by code; ``OTEL_RESOURCE_ATTRIBUTES`` fills in the rest.

    ``service_name`` is the resolved setting (argument, else ``OTEL_SERVICE_NAME``); the flow name
    is only the default.
    """
    attrs: dict[str, Any] = {
        "traincard.rank": rank.rank,
        "traincard.local_rank": rank.local_rank,
        "traincard.world_size": rank.world_size,
        "traincard.node_rank": rank.node_rank,
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
    }
    if mf is not None:
        attrs.update(
            {
                "metaflow.flow_name": mf.flow_name,
                "metaflow.run_id": mf.run_id,
                "metaflow.step_name": mf.step_name,
                "metaflow.task_id": mf.task_id,
                "metaflow.retry_count": mf.retry_count,
                "metaflow.pathspec": mf.pathspec,
            }
        )
        if mf.origin_run_id:
            attrs["metaflow.origin_run_id"] = mf.origin_run_id
    name = service_name or (mf.flow_name if mf else None)
    if name:
        attrs["service.name"] = name
    return attrs
