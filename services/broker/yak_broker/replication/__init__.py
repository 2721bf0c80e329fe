"""Replication on a broker: the asyncio drivers of the pure machines in ``state/``.

- ``replica_manager``: applies metadata changes (``state.replica_plan``), makes and deletes
  logs, ticks the ISR checks; ``replica_roles``: becomes leader or follower of a partition and
  carries out the machines' outputs (ISR proposals, high watermark wake-ups);
- ``replica_fetcher``: one task per leader broker fetching for the followers here;
- ``isr_writer``: ISR changes written to etcd in batches, fenced by the broker's registration;
- ``fetch_session_cache``: the leader's incremental fetch sessions (KIP-227; pure but for the
  ``FetchWaiter`` each session holds), ``fetch_waiter``, ``delayed_fetch``, ``delayed_produce``:
  long-polling fetches and produces waiting for acknowledgement, woken by events, not polling;
- ``partition_metadata``: the ``partition.metadata`` file of a replica folder.

The machines never await; these modules do, and they alone read the clock.
"""
