"""A ``@parallel`` gang's markers, written once by each node's step process so that any reader
finds every node of the gang through the control task (:mod:`traincard_otel._read.load.gang`)."""

from __future__ import annotations

import json
import time

from ..._store.backends import Backend
from ..._store.layout import GANG_FILE, NODE_PREFIX
from ..._types import JsonObject


def write_markers(own: Backend, control: Backend, info: JsonObject) -> None:
    """Written once by each node's step process: ``gang.json`` in its own store and its entry in
    the control task's ``gang/`` folder (an object of its own, so no node overwrites another's)."""
    body = json.dumps({**info, "written_at": time.time()}).encode()
    own.write(GANG_FILE, body)
    control.write(f"{NODE_PREFIX}{int(info['node_index'])}.json", body)
