from traincard_otel.card.metaflow_card import CARDS

__all__ = ["CARDS"]
