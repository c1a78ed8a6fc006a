from traincard_otel.metaflow.card import CARDS

__all__ = ["CARDS"]
