"""The load stage: a located store read into a :class:`~traincard_otel._data.rundata.RunData`.

:func:`.target.read_located` reads a task's store (:mod:`.reader`: segments and Parquet parts,
every attempt and rank merged), or every node of a ``@parallel`` gang (:mod:`.gang`); the tasks'
summaries for sweeps are read by :mod:`.summaries`, its profile captures gathered by
:mod:`.profiles`. Nothing is analysed here.
"""
