"""``make chaos``: a bounded nemesis suite on one machine (issue 21).

A cluster of 3 etcd members, 2 coordinators, 3 brokers and 2 rest-proxies takes idempotent
acks=all writes (RF 3, ``min.insync.replicas`` 2) through the REST API and through the SDK
while one fault class at a time is injected and healed, again and again; afterwards every
partition is read in full and each acknowledged record is looked for: lost, duplicated,
reordered, or moved (acknowledged at one offset, found at another). ``docs/chaos.md`` tells
how to run it and what each fault does.

Modules: ``verdict`` (the pure accounting), ``network`` (namespaces, veths, partitions,
one-way drops, degraded links), ``delayer`` (the user-space netem those links go through),
``shim`` (the LD_PRELOAD slow disk and clock), ``cluster`` (the processes), ``workload`` (the
producers and the final read), ``faults`` (the nemesis), ``runner`` and ``report``.
"""
