"""The printing benchmark's modes on one harness (``python -m benchmarks.bench_log_every_step``)."""
