"""One process's store writer (:mod:`.writer`: immutable segments, atomic state), its compaction
into Parquet parts (:mod:`.compaction`), where a process writes (:mod:`.where`), and the objects a
process writes besides its telemetry: a gang's markers (:mod:`.gang_markers`) and its summary
(:mod:`.summary`)."""
