"""Kafka's ISR replication as pure state machines (see docs/replication.md).

``LeaderPartition`` and ``FollowerPartition`` hold the protocol of one partition on the leader
and on a follower; ``FetchSession`` groups the partitions a follower fetches from one leader
broker; ``replica_plan`` decides which replicas this broker hosts from a metadata snapshot;
``IsrChecks`` which leaders a periodic check must tick. They read no clock and do no network
I/O: time comes in as ``now_ms``, requests go out as messages (``messages.py``), and the only
side effects are on the ``ReplicaLog`` they are given. The drivers one folder up
(``replica_manager``, ``replica_roles``, ``replica_fetcher``) run them from asyncio; the
simulation tests drive the same machines on an in-memory network.

An import-linter contract keeps this package pure: no asyncio, ``time``, ``yak.clock``, metadata
store or cache, HTTP or web library, and none of the drivers.
"""
