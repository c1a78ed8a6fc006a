from traincard_otel._card.metaflow_card import CARDS

__all__ = ["CARDS"]
