"""Metaflow's ignore-all warnings filter is lifted for a step's code and put back after it."""

from __future__ import annotations

import warnings

from traincard_otel.metaflow.step_warnings import StepWarnings


def test_a_warning_of_the_step_shows_and_the_filters_are_put_back_after_the_step() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)  # a filter of the process's own
        warnings.filterwarnings("ignore")  # as metaflow.cli.main does in the task process
        before = list(warnings.filters)
        step = StepWarnings()
        step.lift()
        with warnings.catch_warnings(record=True) as shown:
            warnings.warn("careful at step 30", stacklevel=1)
        assert [str(w.message) for w in shown] == ["careful at step 30"]
        assert ("error", None, ResourceWarning, None, 0) in warnings.filters  # still holds
        step.restore()
        assert warnings.filters == before
        with warnings.catch_warnings(record=True) as shown:
            warnings.warn("after the step", stacklevel=1)
        assert not shown


def test_nothing_changes_where_warnings_are_not_all_ignored() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        before = list(warnings.filters)
        step = StepWarnings()
        step.lift()
        assert warnings.filters == before
        step.restore()
        assert warnings.filters == before
