"""Why a value is untyped: the only names through which ``typing.Any`` enters the package.

Everywhere else a value has a precise type (``object`` where it is only passed on or checked with
``isinstance``). These aliases mark the few places where no precise type exists, and each says
why, so a reader knows what checks the value gets instead.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: An object of a framework the package drives but never imports to name it (a Trainer and its
#: state, a model, an optimizer, an Accelerator, NVML, pyarrow's tables, Metaflow's tasks and
#: datastore, the exporter classes other packages register): its attributes are whatever the
#: user's installed version provides, and most of these ship no type information, so it is used
#: by duck typing.
Foreign: TypeAlias = Any

#: A value user code handed the package: a metric, step or figure (a number, a numpy or torch
#: scalar, or junk), or a setting by keyword. The training thread stores a report as is (checking
#: costs µs there) and the converter converts it off that thread, counting and showing what it
#: rejects; settings are checked once, at start, and a bad one fails loudly.
Reported: TypeAlias = Any

#: A value decoded from JSON (a store record, a card payload, a state file) or built to be encoded
#: as JSON: its shape is checked where it is read, and a record of the wrong shape is counted and
#: shown, never crashed on.
JsonValue: TypeAlias = Any

#: A JSON object: a store record, a payload section, a status body (see :data:`JsonValue`).
JsonObject: TypeAlias = dict[str, JsonValue]
