"""Lightning adapter, for both ``lightning.pytorch`` and ``pytorch_lightning``.

``instrument(trainer)`` reports phases, step ends with their samples, tokens and data wait,
progress, the model's FLOPs per token, checkpoints written by ``ModelCheckpoint`` with their
monitor value and best, exceptions, hyperparameters, and every value ``self.log(...)`` logs, with
no second logging call. It costs the training thread a few µs a step:

* The step ends come from the LightningModule's own ``on_train_batch_start`` and
  ``on_train_batch_end``, wrapped on the instance for the length of a fit. Lightning calls those
  once a step whatever they do; a registered Callback's batch hooks cost about 7 µs each a step
  in Lightning's dispatch (a profiler context and a formatted name per callback and hook) before
  any of its own code runs.
* The logged values are taken from the trainer's logger connector (its ``log_metrics``, wrapped
  on the instance), as tensors, before Lightning decides whether any logger wants them: being a
  Lightning Logger made Lightning turn every logged tensor into a float on the training thread
  (about 17 µs a step). A training step's dict is queued as it is (one deque append) and read
  by a metric source on the reporter's background thread, which makes the tensors floats (a
  CUDA tensor waits for its value there); an evaluation's is reported at once, inside its phase.
* A Callback remains for what happens once a fit, an epoch, an evaluation or a save (phases,
  progress, checkpoints, exceptions); Lightning skips a hook attribute that is not callable, so
  its per-step hooks are switched off. Users may pass it themselves (``LightningCallback`` in
  :mod:`traincard_otel.integrations`): it is the same adapter.

``instrument()`` builds the Callback class for the namespace the trainer comes from; one that a
user makes is built for the namespace imported, and works in a list of callbacks of either, since
Lightning calls a callback's hooks by name.
"""

from __future__ import annotations

from .batches import batch_reader, flops_model, precision_dtype
from .callback import LightningHandle, attach, callback_class, lightning_package
from .steps import CONNECTOR_METHOD, MODULE_HOOKS, StepTaps, step_progress

__all__ = [
    "CONNECTOR_METHOD",
    "MODULE_HOOKS",
    "LightningHandle",
    "StepTaps",
    "attach",
    "batch_reader",
    "callback_class",
    "flops_model",
    "lightning_package",
    "precision_dtype",
    "step_progress",
]
