"""Where a process writes its store: a setting, the Metaflow task's datastore, or a local folder."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..._config import Settings
from ..._identity import MetaflowIdentity, launch_id, run_name
from ..._store.backends import Backend, MetaflowBackend, backend_from_spec


def default_local_dir(env: Mapping[str, str] | None = None) -> str:
    """``TRAINCARD_DIR``/``<run name>`` outside Metaflow: ``TRAINCARD_RUN_NAME``, else the
    launch's (the ranks of a torchrun or ``accelerate launch`` job or an ``srun`` job step share
    it), else one per launch of a script (:func:`~traincard_otel._identity.run_name`)."""
    env = os.environ if env is None else env
    base = env.get("TRAINCARD_DIR") or os.path.join(os.getcwd(), "traincard-data")
    return os.path.join(base, env.get("TRAINCARD_RUN_NAME") or launch_id(env) or run_name(env))


def resolve_backend(settings: Settings, mf: MetaflowIdentity | None) -> Backend | None:
    """The store of this process; None when ``TRAINCARD_STORE=off``."""
    if settings.store and settings.store.lower() == "off":
        return None
    if settings.store:
        return backend_from_spec(settings.store)
    if mf is not None and mf.ds_type and mf.ds_root:
        return MetaflowBackend(mf.ds_type, mf.ds_root, mf.store_prefix)
    return backend_from_spec(default_local_dir())  # TRAINCARD_DIR may be s3://, gs://, az://
