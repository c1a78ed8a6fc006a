"""The exporters of the run's pipeline: the store's own span, log and metric exporters
(:mod:`.store`, registered as the ``traincard`` OTel entry points through
:mod:`traincard_otel.exporters`) and the OTLP wiring from the ``OTEL_*`` variables (:mod:`.otlp`)."""
