"""``@traincard``: telemetry for one Metaflow step, with its live card attached.

    @traincard
    @step
    def train(self):
        trainer = Trainer(...)   # or current.traincard.metrics({...}, step=...) in any loop
        trainer.train()

Every HF Trainer, Lightning Trainer and Accelerator made in the step is instrumented (the hooks of
``autolog()``, held from ``task_pre_step`` to ``task_finished``); ``instrument(trainer)`` in the
step is then the same adapter, reporting once.

Sets up the pipeline in ``task_pre_step`` (store in the task's own datastore folder), exports
``TRAINCARD_STORE``/``TRAINCARD_ATTEMPT`` for child processes (torchrun, accelerate launch),
records failures in ``task_exception``, and in ``task_finished`` shuts down (bounded) and makes
sure a failed task still gets a final card showing the failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from metaflow.decorators import StepDecorator

from .. import _autolog
from .._config import resolve
from .._configure import active_reporter
from .._identity import (
    ENV_CONTROL_TASK,
    ENV_LAUNCHER_PID,
    ENV_NODE_INDEX,
    ENV_NUM_NODES,
    ForeachPosition,
    GangIdentity,
    MetaflowIdentity,
)
from .._read.load.gang import GangReader
from .._safety import report_internal_error
from .._store.backends import MetaflowBackend, sibling_backend
from .._types import Foreign
from .._write import pipeline as _pipeline
from .._write.pipeline import add_terminate_hook, shutdown
from .._write.report.reporter import Reporter
from .._write.store.gang_markers import write_markers
from .live_sweep import LiveSweep
from .refresher import Refresher, mark_driven, traincard_cards
from .step_warnings import StepWarnings

_ENV_SYSTEM_BEFORE = "TRAINCARD_LAUNCHER_SYSTEM_BEFORE"
_AUTOLOG_OWNER = "@traincard"


class TraincardDecorator(StepDecorator):
    """Step decorator. Attributes: ``refresh_interval`` (s, live card), ``flush_interval`` (s,
    store), ``system`` (sample host/GPU), ``attach_card`` (add ``@card(type="traincard")`` if absent),
    ``hourly_cost``, ``baseline`` (the run the card compares with: ``auto``, the default, for the
    latest earlier run of this flow whose step succeeded; ``Flow/run/step``, a run id, or ``none``),
    ``stop_on`` (anomaly kinds that stop training with a checkpoint: ``"nan,loss_spike"``;
    docs/guards.md), ``profile_on`` (kinds that start a profile of 5 steps: ``"throughput_drop,straggler"``).
    Webhooks come from ``TRAINCARD_NOTIFY`` only: URLs are secrets, not code."""

    name = "traincard"
    # None means: the TRAINCARD_* environment variable, else the package default.
    defaults = {
        "refresh_interval": None,
        "flush_interval": None,
        "system": None,
        "attach_card": True,
        "hourly_cost": None,
        "baseline": None,
        "stop_on": None,
        "profile_on": None,
    }

    def step_init(
        self,
        flow: object,
        graph: object,
        step_name: str,
        decorators: Iterable[Foreign],
        environment: object,
        flow_datastore: Foreign,
        logger: object,
    ) -> None:
        self._flow_datastore = flow_datastore
        self._refresher: Refresher | None = None
        self._warnings = StepWarnings()
        for kinds in ("stop_on", "profile_on"):  # an unknown kind fails before the run starts
            if self.attributes[kinds] is not None:
                resolve({kinds: self.attributes[kinds]}, environ={})
        has_card = any(
            getattr(d, "name", "") == "card" and d.attributes.get("type") == "traincard" for d in decorators
        )
        if self.attributes["attach_card"] and not has_card:
            from metaflow.decorators import _attach_decorators_to_step

            _attach_decorators_to_step(
                getattr(flow, step_name), ["card:type=traincard,id=traincard,refresh_interval=1"]
            )

    def task_pre_step(
        self,
        step_name: str,
        task_datastore: object,
        metadata: object,
        run_id: str,
        task_id: str,
        flow: object,
        graph: object,
        retry_count: int,
        max_user_code_retries: int,
        ubf_context: object,
        inputs: object,
    ) -> None:
        from metaflow import current

        self._warnings.lift()  # first: before this process starts threads of its own
        fds = self._flow_datastore
        gang = _gang_identity(flow, str(task_id), ubf_context)
        flow_name = str(current.flow_name)
        mf = MetaflowIdentity(
            flow_name=flow_name,
            run_id=str(run_id),
            step_name=step_name,
            task_id=str(task_id),
            retry_count=int(retry_count),
            origin_run_id=current.origin_run_id,
            ds_type=fds.TYPE,
            ds_root=fds.datastore_root,
            # For the task's summary, which its own writer keeps (sweeps compare summaries).
            foreach=_foreach_position(flow, step_name) if gang is None else None,
            joins=tuple(_joined(flow_name, str(run_id), inputs)),
        )
        backend = MetaflowBackend(fds.TYPE, fds.datastore_root, mf.store_prefix)
        inherited = os.environ.get(ENV_LAUNCHER_PID)
        if inherited and inherited != str(os.getpid()):
            # A local run starts the worker nodes from the control task's process: undo what it
            # set up for its own torchrun children, so this node samples itself.
            saved = os.environ.pop(_ENV_SYSTEM_BEFORE, None)
            if saved is None:
                os.environ.pop("TRAINCARD_SYSTEM", None)
            else:
                os.environ["TRAINCARD_SYSTEM"] = saved
        if gang is not None:
            # Before configure(): this process is the node's launcher, not (yet) a training rank.
            os.environ.update(
                {
                    ENV_NODE_INDEX: str(gang.node_index),
                    ENV_NUM_NODES: str(gang.num_nodes),
                    ENV_CONTROL_TASK: gang.control_task_id,
                    ENV_LAUNCHER_PID: str(os.getpid()),
                }
            )
        attrs = self.attributes
        settings: dict[str, float | bool | str] = {}
        if attrs["flush_interval"] is not None:
            settings["flush_interval_s"] = float(attrs["flush_interval"])
        if attrs["refresh_interval"] is not None:
            settings["refresh_interval_s"] = float(attrs["refresh_interval"])
        if attrs["system"] is not None:
            settings["system"] = _as_bool(attrs["system"])
        if attrs["hourly_cost"] is not None:
            settings["hourly_cost"] = float(attrs["hourly_cost"])
        if attrs["baseline"] is not None:
            settings["baseline"] = str(attrs["baseline"])
        if attrs["stop_on"] is not None:
            settings["stop_on"] = str(attrs["stop_on"])
        if attrs["profile_on"] is not None:
            settings["profile_on"] = str(attrs["profile_on"])
        reporter = Reporter(backend=backend, metaflow_identity=mf, **settings)
        reader = None
        if gang is not None:
            reader = _join_gang(backend, gang, mf, str(task_id))
            # The step process samples its node for the whole task, even after the ranks it
            # started have died; the ranks (torchrun children) must not sample it again.
            if "TRAINCARD_SYSTEM" in os.environ:
                os.environ[_ENV_SYSTEM_BEFORE] = os.environ["TRAINCARD_SYSTEM"]
            os.environ["TRAINCARD_SYSTEM"] = "false"
        # Child processes (torchrun, accelerate launch) inherit where to write and which attempt.
        os.environ["TRAINCARD_STORE"] = backend.spec
        os.environ["TRAINCARD_ATTEMPT"] = str(retry_count)
        if reporter.settings is not None:  # the card's own subprocesses compare with the same run
            os.environ["TRAINCARD_BASELINE"] = reporter.settings.baseline
            if reporter.settings.stop_on:  # the ranks it starts stop on the same kinds
                os.environ["TRAINCARD_STOP_ON"] = ",".join(reporter.settings.stop_on)
            if reporter.settings.profile_on:  # ... and profile on them
                os.environ["TRAINCARD_PROFILE_ON"] = ",".join(reporter.settings.profile_on)
        current._update_env({"traincard": reporter})
        _autolog.hold(_AUTOLOG_OWNER)  # the step's Trainers and Accelerators, from their making
        found = _flow_hyperparameters(flow) if gang is None else {}
        if found:
            reporter.hyperparameters(found)
        # Killed by SIGTERM (preemption, eviction), task_finished never runs: draw the final card then.
        add_terminate_hook(_render_final_cards)
        pipeline_settings, pipeline = reporter.settings, _pipeline.active()
        if reporter.enabled and pipeline_settings is not None and pipeline is not None:
            mark_driven(pipeline)
            self._refresher = Refresher(
                backend,
                mf.pathspec,
                pipeline_settings.refresh_interval_s,
                hourly_cost=pipeline_settings.hourly_cost,
                reader=reader,
                baseline=pipeline_settings.baseline,
                pathspec=mf.pathspec,
                sweep=LiveSweep(
                    backend,
                    mf.pathspec,
                    position=mf.foreach.as_dict() if mf.foreach is not None else None,
                    joins=mf.joins,
                ),
            ).start()

    def task_exception(
        self,
        exception: BaseException,
        step_name: str,
        flow: object,
        graph: object,
        retry_count: int,
        max_user_code_retries: int,
    ) -> None:
        self._warnings.restore()
        reporter = active_reporter()
        if reporter is not None:
            reporter.failure(exception)

    def task_post_step(
        self, step_name: str, flow: object, graph: object, retry_count: int, max_user_code_retries: int
    ) -> None:
        self._warnings.restore()
        reporter = active_reporter()
        if reporter is not None:
            reporter.flush()

    def task_finished(
        self,
        step_name: str,
        flow: object,
        graph: object,
        is_task_ok: bool,
        retry_count: int,
        max_user_code_retries: int,
    ) -> None:
        _autolog.release(_AUTOLOG_OWNER)
        if self._refresher is not None:
            self._refresher.stop()
        shutdown()  # the task's last summary is written before its final card compares summaries
        if not is_task_ok:
            _render_final_cards()


def _gang_identity(flow: object, task_id: str, ubf_context: object) -> GangIdentity | None:
    """This task's place in a ``@parallel`` gang (``current.parallel`` is only complete once the
    control task's step function runs, in a local run: after ``task_pre_step``)."""
    from metaflow.unbounded_foreach import UBF_CONTROL, UBF_TASK

    if ubf_context not in (UBF_CONTROL, UBF_TASK):
        return None
    ubf_iter = getattr(flow, "_parallel_ubf_iter", None)
    num_nodes = getattr(ubf_iter, "num_parallel", None)
    if num_nodes is None:
        return None  # an unbounded foreach that is not @parallel
    if ubf_context == UBF_CONTROL:
        return GangIdentity(node_index=0, num_nodes=int(num_nodes), control_task_id=task_id)
    index = os.environ.get("MF_PARALLEL_NODE_INDEX", "")
    control = os.environ.get("MF_PARALLEL_CONTROL_TASK_ID", "")
    if "_node_" in task_id:  # local runs name worker tasks <control>_node_<i>
        control, index = control or task_id.rsplit("_node_", 1)[0], index or task_id.rsplit("_node_", 1)[1]
    if not index.isdigit() or not control:
        return None
    return GangIdentity(node_index=int(index), num_nodes=int(num_nodes), control_task_id=control)


def _join_gang(
    backend: MetaflowBackend, gang: GangIdentity, mf: MetaflowIdentity, task_id: str
) -> GangReader | None:
    """Write this node's gang markers and return a reader for the whole gang (or None)."""
    try:
        control = (
            backend if task_id == gang.control_task_id else sibling_backend(backend, gang.control_task_id)
        )
        write_markers(
            backend,
            control,
            {
                "node_index": gang.node_index,
                "num_nodes": gang.num_nodes,
                "control_task_id": gang.control_task_id,
                "task_id": task_id,
                "pathspec": mf.pathspec,
                "host": os.uname().nodename,
                "launcher_pid": os.getpid(),
            },
        )
        return GangReader(control, mf.pathspec)
    except Exception as exc:
        report_internal_error("joining the gang", exc)
        return None


_SCALARS = (str, int, float, bool)


def _flow_hyperparameters(flow: Foreign) -> dict[str, object]:
    """The flow's ``Parameter`` values and, in a foreach branch, its input when it is a scalar
    (named after the foreach variable) or a flat dict (each item a hyperparameter)."""
    from metaflow import current

    out: dict[str, object] = {}
    for name in getattr(current, "parameter_names", None) or []:
        value = getattr(flow, name, None)
        if isinstance(value, _SCALARS):
            out[name] = value
    stack = getattr(flow, "_foreach_stack", None) or []
    if stack:
        try:
            value = flow.input
        except Exception:  # an input that cannot be loaded is no hyperparameter
            return out
        if isinstance(value, _SCALARS):
            out[str(stack[-1].var or "input")] = value
        elif isinstance(value, dict) and all(isinstance(v, (*_SCALARS, type(None))) for v in value.values()):
            out.update({str(k): v for k, v in value.items()})
    return out


def _foreach_position(flow: Foreign, step_name: str) -> ForeachPosition | None:
    """Where this task sits in a foreach: the split step, the outer branches' indices, its own."""
    stack = getattr(flow, "_foreach_stack", None) or []
    if not stack:
        return None
    frame = stack[-1]
    return ForeachPosition(
        split=str(frame.step),
        parent=",".join(f"{f.step}:{f.index}" for f in stack[:-1]),
        index=int(frame.index),
        num_splits=int(frame.num_splits) if frame.num_splits is not None else None,
        step=step_name,
    )


def _joined(flow_name: str, run_id: str, inputs: object) -> list[str]:
    """The pathspecs of the branches a join step joins (empty for any other step)."""
    items = list(inputs) if isinstance(inputs, (list, tuple)) else []
    found = [(getattr(i, "step_name", None), getattr(i, "task_id", None)) for i in items]
    if len(found) < 2 or len({step for step, _ in found}) != 1:
        return []
    return [f"{flow_name}/{run_id}/{step}/{task}" for step, task in found]


def _as_bool(value: object) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() not in {"0", "false", "no", "off"}


def _render_final_cards() -> None:
    """Metaflow renders no final card for a failed task; render ours so the failure shows.

    Uses the card manager's creator (private in Metaflow 2.19) exactly as ``@card`` does for
    successful tasks.
    """
    for manager in traincard_cards():
        try:
            for mode in ("render", "refresh"):
                manager._card_creator.create(mode=mode, final=True, **manager._card_creator_args)
        except Exception as exc:
            report_internal_error("final card for a failed task", exc)
