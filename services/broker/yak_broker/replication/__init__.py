"""Kafka's ISR replication as pure state machines (see docs/replication.md).

``LeaderPartition`` and ``FollowerPartition`` hold the protocol of one partition on the leader
and on a follower; ``FetchSession`` groups the partitions a follower fetches from one leader
broker. They read no clock and do no network I/O: time comes in as ``now_ms``, requests go out
as messages (``messages.py``), and the only side effects are on the ``ReplicaLog`` they are
given. The broker drives them from asyncio (``replica_manager``, ``replica_fetcher``); the
simulation tests drive the same machines on an in-memory network.
"""
