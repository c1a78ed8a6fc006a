"""``@traincard``: telemetry for one Metaflow step, with its live card attached.

    @traincard
    @step
    def train(self):
        trainer = Trainer(...)
        traincard_otel.instrument(trainer)   # or current.traincard.metrics({...}, step=...)
        trainer.train()

Sets up the pipeline in ``task_pre_step`` (store in the task's own datastore folder), exports
``TRAINCARD_STORE``/``TRAINCARD_ATTEMPT`` for child processes (torchrun, accelerate launch),
records failures in ``task_exception``, and in ``task_finished`` shuts down (bounded) and makes
sure a failed task still gets a final card showing the failure.
"""

from __future__ import annotations

import os
from typing import Any

from metaflow.decorators import StepDecorator

from .._identity import MetaflowIdentity
from .._pipeline import add_terminate_hook, shutdown
from .._reporter import active_reporter, configure
from .._safety import report_internal_error
from ..store.backends import MetaflowBackend
from .refresher import Refresher, traincard_cards


class TraincardDecorator(StepDecorator):
    """Step decorator. Attributes: ``refresh_interval`` (s, live card), ``flush_interval`` (s,
    store), ``system`` (sample host/GPU), ``attach_card`` (add ``@card(type="traincard")`` if absent),
    ``hourly_cost``."""

    name = "traincard"
    # None means: the TRAINCARD_* environment variable, else the package default.
    defaults = {
        "refresh_interval": None,
        "flush_interval": None,
        "system": None,
        "attach_card": True,
        "hourly_cost": None,
    }

    def step_init(
        self,
        flow: Any,
        graph: Any,
        step_name: str,
        decorators: Any,
        environment: Any,
        flow_datastore: Any,
        logger: Any,
    ) -> None:
        self._flow_datastore = flow_datastore
        self._refresher: Refresher | None = None
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
        task_datastore: Any,
        metadata: Any,
        run_id: str,
        task_id: str,
        flow: Any,
        graph: Any,
        retry_count: int,
        max_user_code_retries: int,
        ubf_context: Any,
        inputs: Any,
    ) -> None:
        from metaflow import current

        fds = self._flow_datastore
        mf = MetaflowIdentity(
            flow_name=str(current.flow_name),
            run_id=str(run_id),
            step_name=step_name,
            task_id=str(task_id),
            retry_count=int(retry_count),
            origin_run_id=current.origin_run_id,
            ds_type=fds.TYPE,
            ds_root=fds.datastore_root,
        )
        backend = MetaflowBackend(fds.TYPE, fds.datastore_root, mf.store_prefix)
        attrs = self.attributes
        settings: dict[str, Any] = {}
        if attrs["flush_interval"] is not None:
            settings["flush_interval_s"] = float(attrs["flush_interval"])
        if attrs["refresh_interval"] is not None:
            settings["refresh_interval_s"] = float(attrs["refresh_interval"])
        if attrs["system"] is not None:
            settings["system"] = _as_bool(attrs["system"])
        if attrs["hourly_cost"] is not None:
            settings["hourly_cost"] = float(attrs["hourly_cost"])
        reporter = configure(backend=backend, metaflow_identity=mf, **settings)
        # Child processes (torchrun, accelerate launch) inherit where to write and which attempt.
        os.environ["TRAINCARD_STORE"] = backend.spec
        os.environ["TRAINCARD_ATTEMPT"] = str(retry_count)
        current._update_env({"traincard": reporter})
        # Killed by SIGTERM (preemption, eviction), task_finished never runs: draw the final card then.
        add_terminate_hook(_render_final_cards)
        pipeline_settings = reporter.settings
        if reporter.enabled and pipeline_settings is not None:
            self._refresher = Refresher(
                backend,
                mf.pathspec,
                pipeline_settings.refresh_interval_s,
                hourly_cost=pipeline_settings.hourly_cost,
            ).start()

    def task_exception(
        self,
        exception: BaseException,
        step_name: str,
        flow: Any,
        graph: Any,
        retry_count: int,
        max_user_code_retries: int,
    ) -> None:
        reporter = active_reporter()
        if reporter is not None:
            reporter.failure(exception)

    def task_post_step(
        self, step_name: str, flow: Any, graph: Any, retry_count: int, max_user_code_retries: int
    ) -> None:
        reporter = active_reporter()
        if reporter is not None:
            reporter.flush()

    def task_finished(
        self,
        step_name: str,
        flow: Any,
        graph: Any,
        is_task_ok: bool,
        retry_count: int,
        max_user_code_retries: int,
    ) -> None:
        if self._refresher is not None:
            self._refresher.stop()
        shutdown()
        if not is_task_ok:
            _render_final_cards()


def _as_bool(value: Any) -> bool:
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
