"""The write side: what training reports, turned into the store and the OTel stream.

report (:mod:`.report`: the training thread's calls) -> queue (:mod:`.queue`) -> convert
(:mod:`.convert`: reports to OTel signals, off the training thread) -> export (:mod:`.export`: the
store's exporters; OTLP from ``OTEL_*``) -> store (:mod:`.store`: the writer, compaction). The
pipeline (:mod:`.pipeline`) builds and runs them; :mod:`.telemetry` samples the system, the GPUs,
the console and the rank's health into the same queue. Nothing here reads the store back, except
as the control channel (requests to a rank, other ranks' liveness).
"""
