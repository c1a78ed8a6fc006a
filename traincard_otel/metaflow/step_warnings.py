"""Python warnings in a ``@traincard`` step, as the step's code would show them outside Metaflow.

Metaflow's command line ignores every warning in the task process
(``warnings.filterwarnings("ignore")`` in ``metaflow.cli.main``, meant for its own log
buffering): a ``warnings.warn(...)`` in the step's code then reaches neither the task's logs
nor the card. For the step's code (``task_pre_step`` to ``task_post_step``) that one filter is
lifted, so Python's own filters decide again (a warning shows once per place; what the code or
``PYTHONWARNINGS`` set still holds) and console capture records what is printed; afterwards the
filters are what they were, and Metaflow's own work after the step stays quiet.
"""

from __future__ import annotations

import warnings

#: The entry ``warnings.filterwarnings("ignore")`` makes: every warning, everywhere, ignored.
IGNORE_ALL = ("ignore", None, Warning, None, 0)


class StepWarnings:
    """Lifts Metaflow's ignore-all filter for the step's code, and puts the filters back after."""

    def __init__(self) -> None:
        self._saved: warnings.catch_warnings | None = None

    def lift(self) -> None:
        """Python's filters without the ignore-all entry (nothing to do where there is none)."""
        if self._saved is not None or IGNORE_ALL not in warnings.filters:
            return
        # catch_warnings keeps the filters and showwarning to restore, and (on entering) tells
        # the warnings module its filters changed, so no place's earlier "ignored" verdict sticks
        # (called before this process starts threads of its own, nothing warns in between).
        saved = warnings.catch_warnings()
        saved.__enter__()
        self._saved = saved
        warnings.filters = [entry for entry in warnings.filters if entry != IGNORE_ALL]

    def restore(self) -> None:
        """The filters as they were before :meth:`lift` (also those the step's code added go)."""
        saved, self._saved = self._saved, None
        if saved is not None:
            saved.__exit__(None, None, None)
