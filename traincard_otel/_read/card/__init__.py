"""The ``traincard`` Metaflow card: payload building (:mod:`.payload`), HTML assembly
(:mod:`._html`) and the ``MetaflowCard`` subclass (:mod:`.metaflow_card`, imports Metaflow)."""
