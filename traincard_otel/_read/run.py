"""``load(target)``: a run read and analysed, as :class:`LoadedRun` (its data with what the
analysis makes of it).

The store reads plain :class:`~traincard_otel._data.rundata.RunData`; ``load()`` wraps it as a
:class:`LoadedRun`, which adds the run it is compared with (:attr:`LoadedRun.baseline`) and the
analysis of :mod:`traincard_otel._analysis` (:attr:`LoadedRun.insights`: goodput, efficiency,
anomalies, the comparison, a gang's diagnosis), computed once, when it is loaded.
"""

from __future__ import annotations

import dataclasses
import html

from .._analysis.analysis import Insights, analyse
from .._analysis.baseline import Baseline, Comparison, compare
from .._analysis.goodput import Goodput
from .._data.rundata import RunData
from .baseline import load_baseline
from .card.render import render_data
from .load.target import read


@dataclasses.dataclass
class LoadedRun(RunData):
    """A :class:`~traincard_otel._data.rundata.RunData` as ``load()`` returns it."""

    #: the run this one is compared with, set by ``load(target, baseline=...)`` (see :meth:`compare`)
    baseline: Baseline | None = None
    #: what the analysis made of this run when loaded (:func:`traincard_otel._analysis.analysis.analyse`)
    insights: Insights | None = None

    @classmethod
    def of(cls, data: RunData, baseline: Baseline | None = None, now: float | None = None) -> LoadedRun:
        """``data`` as a loaded run (its fields shared, not copied), analysed at ``now``."""
        fields = {f.name: getattr(data, f.name) for f in dataclasses.fields(RunData) if f.init}
        run = cls(**fields, baseline=baseline)
        run.insights = analyse(run, now=now, baseline=baseline)
        return run

    def _analysed(self) -> Insights:
        if self.insights is None:  # built directly rather than by of()
            self.insights = analyse(self, baseline=self.baseline)
        return self.insights

    @property
    def goodput(self) -> Goodput | None:
        """Wall time split into productive training steps and the rest (startup, data wait, eval,
        checkpoints, stalls, restarts, shutdown) when loaded; None when no step was timed.
        :mod:`traincard_otel._analysis.goodput` defines each category."""
        return self._analysed().goodput

    def compare(self, other: RunData | None = None, *, label: str | None = None) -> Comparison | None:
        """Where this run stands against ``other`` (default: :attr:`baseline`) at its latest step.

        Compares the training loss (lower is better) and the time per step over the last 20 steps
        up to this run's latest one; :mod:`traincard_otel._analysis.baseline` defines both.
        None when there is nothing to compare with (no baseline, or one that could not be read:
        ``run.baseline.note`` says why).

        Example::

            run = traincard_otel.load("TrainFlow/12/train/3", baseline="auto")
            print(run.baseline.label)          # TrainFlow/11/train/2: the latest earlier good run
            print(run.compare().metric.text)   # loss ahead of baseline at step 400: 0.41 vs 0.45 (...)
        """
        if other is None:
            if label is None or self.baseline is None or label == self.baseline.label:
                return self._analysed().comparison
            if self.baseline.data is None:
                return None
            other = self.baseline.data
        return compare(self, other, label or other.source)

    def _repr_html_(self) -> str:
        """The card, inline in Jupyter (sandboxed in an iframe, so its scripts run on their own)."""
        page = render_data(self, live=False, final=True, baseline=self.baseline, insights=self._analysed())
        return (
            f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:900px;border:0" '
            'sandbox="allow-scripts"></iframe>'
        )


def load(target: object, *, baseline: str | None = None) -> LoadedRun:
    """Read everything a training task recorded: metric series, phases, checkpoints, logs, status.

    Args:
        target: a store directory (``TRAINCARD_DIR/...``; a folder of several runs gives the
            newest), a store URL (``s3://bucket/prefix/run``,
            ``gs://...``, ``az://container/...``, read with Metaflow's clients), a Metaflow pathspec
            (``"Flow/run/step/task"``, or ``Flow``, ``Flow/run``, ``Flow/run/step`` with ``latest``
            for the run) or a ``metaflow.Task``. Attempts and ranks are merged; for any
            task of a ``@parallel`` gang, so are all the gang's nodes (``run.gang`` lists them).
        baseline: a run to compare with, set as ``run.baseline`` (a
            :class:`~traincard_otel._analysis.baseline.Baseline`; ``run.compare()`` then says where
            this run stands): ``"auto"`` for the latest earlier run of the same flow whose same
            step succeeded (in the run's namespace; Metaflow targets only), a pathspec
            ``Flow/run[/step[/task]]`` or a run id of the same flow, or a store folder or URL.
            A baseline that is missing or cannot be read leaves ``run.baseline.data`` None and
            says why in ``run.baseline.note``. Default: no baseline.

    Example::

        run = traincard_otel.load("FinetuneFlow/1763/train/2")
        loss = run.metrics["loss"]
        print(loss.steps[-1], loss.values[-1], run.status["status"])
    """
    data, pathspec = read(target)
    return LoadedRun.of(data, load_baseline(pathspec, baseline) if baseline is not None else None)
