"""Who is reporting: Metaflow task identity and distributed rank, as resource attributes."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._schema import Attr

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue


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
class GangIdentity:
    """This node's place in a Metaflow ``@parallel`` gang (``current.parallel``)."""

    node_index: int
    num_nodes: int
    control_task_id: str


@dataclasses.dataclass(frozen=True)
class RankIdentity:
    """``launcher`` marks the Metaflow step process of a gang node: it starts the training ranks
    (torchrun) and samples the node, but is a training rank only when no rank reports beside it."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    node_rank: int = 0
    gang: GangIdentity | None = None
    launcher: bool = False


def _env_int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        raw = env.get(name, "").strip()
        if raw.lstrip("-").isdigit():
            return int(raw)
    return None


# Set by ``@traincard`` on each node of a gang before the step runs, for its children too: in a
# local run the control task's ``MF_PARALLEL_*`` variables appear only once its step starts.
ENV_NODE_INDEX = "TRAINCARD_NODE_INDEX"
ENV_NUM_NODES = "TRAINCARD_NUM_NODES"
ENV_CONTROL_TASK = "TRAINCARD_GANG_CONTROL"
ENV_LAUNCHER_PID = "TRAINCARD_LAUNCHER_PID"


def detect_gang(env: Mapping[str, str] | None = None) -> GangIdentity | None:
    """The ``@parallel`` gang this process belongs to, from ``@traincard``'s or Metaflow's variables."""
    env = os.environ if env is None else env
    for index_var, count_var, control_var in (
        (ENV_NODE_INDEX, ENV_NUM_NODES, ENV_CONTROL_TASK),
        ("MF_PARALLEL_NODE_INDEX", "MF_PARALLEL_NUM_NODES", "MF_PARALLEL_CONTROL_TASK_ID"),
    ):
        index, count = _env_int(env, index_var), _env_int(env, count_var)
        control = env.get(control_var, "").strip()
        if index is not None and count is not None and control:
            return GangIdentity(node_index=index, num_nodes=count, control_task_id=control)
    return None


def detect_rank(env: Mapping[str, str] | None = None, pid: int | None = None) -> RankIdentity:
    """Rank from torchrun/accelerate env vars, else from an initialised ``torch.distributed``.

    The Metaflow step process of a gang node (``TRAINCARD_LAUNCHER_PID`` is its pid) is rank
    ``node_index`` of ``num_nodes`` (one process per node) and marked as the node's launcher:
    where torchrun ranks report beside it, the reader counts them, not it.
    """
    env = os.environ if env is None else env
    rank = _env_int(env, "RANK", "SLURM_PROCID")
    world = _env_int(env, "WORLD_SIZE", "SLURM_NTASKS")
    local = _env_int(env, "LOCAL_RANK", "SLURM_LOCALID")
    node = _env_int(env, "GROUP_RANK", "NODE_RANK", "SLURM_NODEID")
    gang = detect_gang(env)
    launcher = gang is not None and _env_int(env, ENV_LAUNCHER_PID) == (os.getpid() if pid is None else pid)
    if launcher and gang is not None:
        return RankIdentity(
            rank=gang.node_index,
            local_rank=0,
            world_size=gang.num_nodes,
            node_rank=gang.node_index,
            gang=gang,
            launcher=True,
        )
    if rank is None and "torch" in sys.modules:
        dist = getattr(sys.modules["torch"], "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
    rank = rank or 0
    if node is None and gang is not None:
        node = gang.node_index
    return RankIdentity(
        rank=rank,
        local_rank=local if local is not None else rank,
        world_size=max(world or 1, 1),
        node_rank=node or 0,
        gang=gang,
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
) -> dict[str, AttributeValue]:
    """Resource attributes set by code; ``OTEL_RESOURCE_ATTRIBUTES`` fills in the rest.

    ``service_name`` is the resolved setting (argument, else ``OTEL_SERVICE_NAME``); the flow name
    is only the default.
    """
    attrs: dict[str, AttributeValue] = {
        Attr.RANK: rank.rank,
        Attr.LOCAL_RANK: rank.local_rank,
        Attr.WORLD_SIZE: rank.world_size,
        Attr.NODE_RANK: rank.node_rank,
        Attr.ROLE: "launcher" if rank.launcher else "rank",
        Attr.HOST_NAME: socket.gethostname(),
        Attr.PROCESS_PID: os.getpid(),
    }
    if rank.gang is not None:  # a Grafana panel splits by node and rank with these
        attrs[Attr.NODE_INDEX] = rank.gang.node_index
        attrs[Attr.PARALLEL_NODE_INDEX] = rank.gang.node_index
        attrs[Attr.PARALLEL_NUM_NODES] = rank.gang.num_nodes
        attrs[Attr.PARALLEL_CONTROL_TASK_ID] = rank.gang.control_task_id
    if mf is not None:
        attrs.update(
            {
                Attr.MF_FLOW_NAME: mf.flow_name,
                Attr.MF_RUN_ID: mf.run_id,
                Attr.MF_STEP_NAME: mf.step_name,
                Attr.MF_TASK_ID: mf.task_id,
                Attr.MF_RETRY_COUNT: mf.retry_count,
                Attr.MF_PATHSPEC: mf.pathspec,
            }
        )
        if mf.origin_run_id:
            attrs[Attr.MF_ORIGIN_RUN_ID] = mf.origin_run_id
    name = service_name or (mf.flow_name if mf else None)
    if name:
        attrs[Attr.SERVICE_NAME] = name
    return attrs
