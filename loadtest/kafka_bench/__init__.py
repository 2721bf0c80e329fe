"""``make bench-kafka``'s parts: the goals and the matrix count (``calc``), the idle produce
latency probes (``idle``) and the block of ``docs/benchmarks.md`` (``markdown``)."""
