"""The telemetry store: immutable segments and atomically replaced state, per attempt and rank.

Writers (one per process) live in :mod:`.writer`; the reader that merges every attempt and rank
into one timeline is :mod:`.reader`; where bytes go is :mod:`.backends`.
"""
