"""A gang's diagnosis: per-rank table, stragglers, hung ranks, the first failure and what followed,
node readings and torchrun's own failure report (:func:`.attribution.analyze` puts them together)."""
