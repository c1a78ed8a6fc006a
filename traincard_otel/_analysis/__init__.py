"""Answers computed from a run's rows and records: anomalies, goodput, model FLOPs utilisation, the
comparison with a baseline run, a gang's diagnosis, summaries for sweeps, the step anatomy
(:mod:`.anatomy`), a profile's breakdown (:mod:`.profile`) and a CUDA memory snapshot's summary
(:mod:`.memory`).

Pure computations with no I/O, below both sides of the store: the converter judges rows with
:class:`~.anomalies.AnomalyDetector` and tallies goodput as they go out (the write side); the
card, ``load()`` and the CLI analyse what a store holds with :func:`~.analysis.analyse` (the read
side).
"""
