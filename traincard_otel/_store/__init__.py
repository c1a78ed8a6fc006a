"""The store as both sides know it: where its bytes live (:mod:`.backends`: a local folder or a
Metaflow datastore), the names of its objects (:mod:`.layout`), and its formats: immutable JSON-lines
segments (:mod:`.segment`) and compacted Parquet parts (:mod:`.part_format`); and what running ranks
are asked through it (:mod:`.requests`: ``traincard stacks``, ``traincard profile``). The writer is
:mod:`traincard_otel._write.store`; the reader, :mod:`traincard_otel._read.load`.
"""
