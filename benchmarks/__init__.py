"""Benchmarks of traincard-otel: ``python -m benchmarks`` runs every ``bench_*.py`` and prints ratios."""
