"""The read side: a store turned into a page, a ``load()`` result or a sweep.

locate (:mod:`.locate`: what a target names) -> load (:mod:`.load`: stores to ``RunData``) ->
analyse (:mod:`traincard_otel._analysis`) -> payload (:mod:`.payload`: the card's sections) -> card
(:mod:`.card`: one HTML page). The entry points drive the walk once each: :mod:`.render`
(``traincard render``, the Metaflow card), :mod:`.run` (``load()``), :mod:`.sweep` (``sweep()``) and
:mod:`.baseline` (the run compared with). Nothing here writes into a store.
"""
