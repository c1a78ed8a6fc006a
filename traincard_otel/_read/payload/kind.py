"""What kind of loop a run is (training, evaluation or inference), so the card names its things.

A run that timed optimizer steps (``Reporter.step_end``, every adapter) is training. Otherwise its
phases decide: an inference phase (``infer``, ``predict``, ``generate`` ...) makes it inference,
an evaluation phase (``eval``, ``validation``, ``test`` ...) evaluation; anything else, or nothing,
is training. An evaluation or inference run counts items where training counts steps, has no
epochs, and its curves are labelled with its own phase rather than "train". A training run whose
adapter said it is an online RL trainer (``progress["loop"] == "rl"``) is RL: training, with its
rewards, policy and completions figures grouped (:mod:`.rl`).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from ..._data.rundata import RunData
from ..._schema import PHASE_SPAN_PREFIX
from ..._schema.records import LOOP_FIELD, RL_LOOP

_TRAINING_PHASES: Final = frozenset({"train", "training", "fit", "finetune", "pretrain"})
_INFERENCE_PHASES: Final = frozenset(
    {"infer", "inference", "predict", "prediction", "generate", "generation", "serve", "score"}
)
_EVALUATION_PHASES: Final = frozenset(
    {"eval", "evaluate", "evaluation", "validation", "validate", "val", "test"}
)


class RunKind(NamedTuple):
    """The words the card uses for a kind of run."""

    name: str  # training, evaluation, inference
    unit: str  # what the x axis and the progress count: step or item
    series: str  # the label of a curve that names no phase of its own
    title: str  # the title of the metrics section


TRAINING: Final = RunKind("training", "step", "train", "Training metrics")
EVALUATION: Final = RunKind("evaluation", "item", "eval", "Evaluation metrics")
INFERENCE: Final = RunKind("inference", "item", "infer", "Inference metrics")
RL: Final = RunKind("rl", "step", "train", "Training metrics")


def run_kind(data: RunData) -> RunKind:
    """The kind of ``data``'s run (see the module docstring)."""
    progress = data.status.get("progress") or {}
    if progress.get(LOOP_FIELD) == RL_LOOP:
        return RL
    if any(len(s) for s in data.step_times.values()):
        return TRAINING
    names = {
        str(p.get("n", ""))[len(PHASE_SPAN_PREFIX) :].lower()
        for p in data.phases
        if str(p.get("n", "")).startswith(PHASE_SPAN_PREFIX)
    }
    names |= {str(data.status.get("phase") or "").lower()}
    if names & _TRAINING_PHASES:
        return TRAINING
    if names & _INFERENCE_PHASES:
        return INFERENCE
    if names & _EVALUATION_PHASES:
        return EVALUATION
    return TRAINING
