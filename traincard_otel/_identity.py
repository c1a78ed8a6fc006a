"""Who is reporting: Metaflow task identity and distributed rank, as resource attributes."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._schema import Attr

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue


@dataclasses.dataclass(frozen=True)
class ForeachPosition:
    """Where a task sits in a Metaflow foreach: the split step, the outer foreach branches it is
    inside (``step:index,...``), its own index, how many branches the split made, and its step."""

    split: str
    parent: str
    index: int
    num_splits: int | None
    step: str

    def as_dict(self) -> dict[str, str | int | None]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class MetaflowIdentity:
    """A Metaflow task; ``foreach`` and ``joins`` (the pathspecs of the branches a join step
    joins) are known where ``@traincard`` set the task up, for the task's summary."""

    flow_name: str
    run_id: str
    step_name: str
    task_id: str
    retry_count: int
    origin_run_id: str | None
    ds_type: str | None = None
    ds_root: str | None = None
    foreach: ForeachPosition | None = None
    joins: tuple[str, ...] = ()

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
    local_world_size: int | None = None  # ranks on this node, where the launcher says


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


# Every variable a launcher sets to give a process its rank (torchrun, accelerate, SLURM, MPI,
# Metaflow @parallel and @traincard's gang nodes): what :func:`launched_rank` and
# :func:`detect_gang` read; a child process that inherited them unchanged is no rank.
RANK_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_NODEID",
    "SLURM_STEP_ID",
    "SLURM_STEP_NUM_TASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "MF_PARALLEL_NODE_INDEX",
    "MF_PARALLEL_CONTROL_TASK_ID",
    ENV_NODE_INDEX,
    ENV_CONTROL_TASK,
    ENV_LAUNCHER_PID,
)


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


def _slurm_tasks_per_node(spec: str, node: int) -> int | None:
    """Tasks on node ``node`` from SLURM's compressed list (``"2(x3),1"``: 2, 2, 2, then 1)."""
    counts: list[int] = []
    for part in spec.split(","):
        count, _, times = part.strip().partition("(x")
        if not count.isdigit():
            return None
        repeat = times.rstrip(")")
        counts += [int(count)] * (int(repeat) if repeat.isdigit() else 1)
    return counts[node] if 0 <= node < len(counts) else None


def launched_rank(env: Mapping[str, str] | None = None) -> RankIdentity | None:
    """This process's rank as its launcher set it, or None where no launcher says.

    torch's variables first (``torchrun``, ``python -m torch.distributed.run``, ``accelerate
    launch``, anything setting ``RANK``), else a task of ``srun`` (``SLURM_PROCID`` with a job step),
    else Open MPI's ``mpirun``. Each scheme is read whole: no mix of one launcher's rank with
    another's world size (a ``torchrun`` inside an ``srun`` task has both).
    """
    env = os.environ if env is None else env
    if (rank := _env_int(env, "RANK")) is not None or _env_int(env, "WORLD_SIZE") is not None:
        rank = rank or 0
        world = _env_int(env, "WORLD_SIZE")
        local = _env_int(env, "LOCAL_RANK")
        node = _env_int(env, "GROUP_RANK", "NODE_RANK")
        local_world = _env_int(env, "LOCAL_WORLD_SIZE")
    elif (rank := _env_int(env, "SLURM_PROCID")) is not None and (
        env.get("SLURM_STEP_ID", env.get("SLURM_STEPID")) is not None
    ):
        # a batch script also has SLURM_PROCID=0 and the job's SLURM_NTASKS: only srun's tasks
        # (a job step) are ranks
        world = _env_int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
        local = _env_int(env, "SLURM_LOCALID")
        node = _env_int(env, "SLURM_NODEID")
        spec = env.get("SLURM_STEP_TASKS_PER_NODE", env.get("SLURM_TASKS_PER_NODE", ""))
        local_world = _slurm_tasks_per_node(spec, node or 0) if spec else None
    elif (rank := _env_int(env, "OMPI_COMM_WORLD_RANK")) is not None:
        world = _env_int(env, "OMPI_COMM_WORLD_SIZE")
        local = _env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK")
        node = _env_int(env, "OMPI_COMM_WORLD_NODE_RANK")
        local_world = _env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE")
    else:
        return None
    return RankIdentity(
        rank=rank,
        local_rank=local if local is not None else rank,
        world_size=max(world or 1, 1),
        node_rank=node or 0,
        local_world_size=local_world,
    )


def launch_id(env: Mapping[str, str] | None = None, parent_pid: int | None = None) -> str | None:
    """A name every rank of one launch shares (the processes of one ``torchrun``, ``accelerate
    launch`` or ``srun`` job step), for the run's store outside Metaflow; None outside a launch.

    torch elastic's run id where it has one; on one node without one (``accelerate launch`` and
    torchrun's static rendezvous leave it ``none``), the host and the launcher's pid, this
    process's parent (``parent_pid``).
    """
    env = os.environ if env is None else env
    run_id = env.get("TORCHELASTIC_RUN_ID")
    if run_id and run_id != "none":
        return f"torchrun-{run_id}"
    if run_id == "none" and _env_int(env, "GROUP_WORLD_SIZE") == 1:
        return f"torchrun-{socket.gethostname()}-{os.getppid() if parent_pid is None else parent_pid}"
    job, step = env.get("SLURM_JOB_ID"), env.get("SLURM_STEP_ID", env.get("SLURM_STEPID"))
    if job and step is not None and _env_int(env, "SLURM_PROCID") is not None:
        return f"slurm-{job}-{step}"
    return None


def run_name(env: Mapping[str, str] | None = None) -> str:
    """The run's folder name where no launcher names the run: ``run-<UTC start>-<pid>`` of the
    process that started it, so that each launch of a script is a run of its own (a re-run is not
    a restart of the last one; ``TRAINCARD_RUN_NAME`` continues a run across launches).

    That process is this one, except for a rank whose launcher gives no run id (``RANK`` and
    ``WORLD_SIZE`` set by a launcher of its own) or a process that ``multiprocessing`` started
    (``torch.multiprocessing.spawn``): their parent, which the other ranks share.
    """
    import multiprocessing

    env = os.environ if env is None else env
    parent = multiprocessing.parent_process()
    rank = launched_rank(env)
    if parent is not None and parent.pid is not None:
        pid = parent.pid
    elif rank is not None and rank.world_size > 1:
        pid = os.getppid()
    else:
        pid = os.getpid()
    return f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(_started(pid)))}-{pid}"


def _started(pid: int) -> float:
    """When process ``pid`` started (wall clock); now if that cannot be read."""
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:  # gone, or not ours to read: the name only needs to be one per launch
        return time.time()


def detect_rank(env: Mapping[str, str] | None = None, pid: int | None = None) -> RankIdentity:
    """Rank from the launcher's variables (:func:`launched_rank`), else from an initialised
    ``torch.distributed``.

    The Metaflow step process of a gang node (``TRAINCARD_LAUNCHER_PID`` is its pid) is rank
    ``node_index`` of ``num_nodes`` (one process per node) and marked as the node's launcher:
    where torchrun ranks report beside it, the reader counts them, not it.
    """
    env = os.environ if env is None else env
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
    found = launched_rank(env)
    if found is None and "torch" in sys.modules:
        dist = getattr(sys.modules["torch"], "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank = dist.get_rank()
            found = RankIdentity(rank=rank, local_rank=rank, world_size=dist.get_world_size())
    found = found or RankIdentity()
    if gang is not None:
        env_node = _env_int(env, "GROUP_RANK", "NODE_RANK", "SLURM_NODEID")
        found = dataclasses.replace(
            found, gang=gang, node_rank=gang.node_index if env_node is None else found.node_rank
        )
    return found


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
