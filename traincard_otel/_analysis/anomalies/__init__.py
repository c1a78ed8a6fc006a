"""Anomalies in a training run, found row by row as the converter hands the rows on.

The rules' thresholds (:mod:`.rules`), which metrics each rule watches by their names
(:mod:`.roles`), the rolling window with its median (:mod:`.window`) and the detector that applies
them (:mod:`.detector`).

:class:`AnomalyDetector` is fed every accepted metric value (:meth:`~AnomalyDetector.observe`)
and every timed step end (:meth:`~AnomalyDetector.observe_step`) in report order, and returns
the anomalies each one reveals. It keeps a bounded window per watched metric, so its memory does
not grow with the run. The rules, by the kind they flag (:mod:`traincard_otel._schema.anomaly_kinds`),
each with its :class:`AnomalyRules` field:

``loss_spike``
    A training loss (a name containing ``loss``, reported outside any phase or in ``train``)
    more than ``spike_mads`` median absolute deviations (scaled by 1.4826, so one MAD estimates
    one standard deviation of normal noise) *above* the median of its last ``window`` values, and
    more than ``spike_min_relative`` of that median above it (a plateau has a MAD near zero: a
    rounding-level wiggle is not a spike). Only upward jumps count: a loss falling fast is the
    point of training. Needs ``min_points`` values first; after a spike, ``cooldown`` further
    values of that metric are not flagged again (one divergence is one event, not fifty).
``nan``
    NaN or infinity in a loss or a gradient norm (``grad_norm``, ``gradient_norm``, ``grad-norm``:
    a name with ``grad`` and ``norm`` in it), in any phase. Flagged once when it starts; flagged
    again only after a finite value has been seen.
``grad_explosion``
    A gradient norm more than ``grad_factor`` times the median of its last ``window`` values
    (after ``min_points``), with the same cooldown.
``throughput_drop``
    Tokens per second (samples per second where no tokens are counted, steps per second where
    neither is) below ``throughput_fraction`` of the median of the last ``window`` steps for
    ``throughput_steps`` steps in a row. Flagged once per drop; a step back above the threshold
    ends it.
``eval_regression``
    An evaluation metric (a name starting with ``eval``, ``val``, ``validation``, ``valid`` or
    ``test``, as trainers name them) worse than the best value so far by more than
    ``eval_margin`` (relative to the best's magnitude). Which way is better comes from the name
    (:func:`~.roles.direction`); a name that says neither is not judged. Flagged once per best value.
``reward_collapse``
    An RL run's rewards stopped telling completions apart: the share of groups whose completions
    all scored the same (``frac_reward_zero_std``, TRL's name) at least ``collapse_share``, or a
    total reward's standard deviation (``reward_std``, ``objective/scores_std``; not one reward
    function's, which may be constant by design) at most ``collapse_std``, for ``collapse_steps``
    reports in a row. With no spread the advantages are zero and the policy learns nothing.
    Flagged once per stretch.
``kl_blowup``
    The KL divergence from the reference policy (a name with the word ``kl``: ``kl``,
    ``objective/kl``) above ``kl_max``, or more than ``kl_factor`` times the median of its last
    ``window`` values (after ``min_points``), with the same cooldown as a loss spike.

``TRAINCARD_ANOMALIES`` sets the rules for a run: ``off``, or comma-separated ``field=value``
pairs (``spike_mads=8,window=100``); :meth:`AnomalyRules.parse` reads it and fails loudly on a
field or value it does not know.
"""

from .detector import Anomaly, AnomalyDetector, nonfinite_message
from .roles import NONFINITE_ROLES, Role, direction, role
from .rules import AnomalyRules
from .window import MAD_SCALE

__all__ = [
    "MAD_SCALE",
    "NONFINITE_ROLES",
    "Anomaly",
    "AnomalyDetector",
    "AnomalyRules",
    "Role",
    "direction",
    "nonfinite_message",
    "role",
]
