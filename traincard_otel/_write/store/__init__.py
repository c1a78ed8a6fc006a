"""One process's store writer (:mod:`.writer`: immutable segments, atomic state, and the process's
summary for sweeps) with its bounded retries (:mod:`.retry`), its compaction into Parquet parts
(:mod:`.compaction`) and their merges (:mod:`.merge`), where a process writes (:mod:`.where`), and
a gang's markers (:mod:`.gang_markers`)."""
