"""Metaflow glue: the ``@traincard`` step decorator and the live-card refresher (import Metaflow)."""
