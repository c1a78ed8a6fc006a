"""Answers computed from a run's rows and records: anomalies, goodput, model FLOPs utilisation, and
the comparison with a baseline run.

Pure computations with no I/O and no imports above the foundation layer: the converter feeds
:class:`~.anomalies.AnomalyDetector` as rows go out, the card and ``load()`` read
:func:`~.goodput.goodput` and :mod:`.flops` off what the store holds.
"""
