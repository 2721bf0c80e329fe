"""The controller's decisions, as pure functions of state and time.

Each takes values (a ``ClusterSnapshot``, records read from etcd, ``now_ms``) and returns what
to write; none reads a clock, a store or the network, so the same input always gives the same
answer and a coordinator that takes over halfway through an operation finishes it. The drivers
one folder up apply them: ``reconciler`` (``partition_plan``, with ``placement``,
``reassignment`` and ``decommission``), ``broker_recorder`` (``broker_record_rules``),
``cluster_admin`` and ``topic_admin`` (``reassignment``, ``decommission``), ``metrics``
(``partition_health``) and ``groups/group_coordinator`` (``group_reconcile``, ``assignors``).

An import-linter contract keeps this package pure: no asyncio, ``time``, ``yak.clock``, metadata
store, cache or etcd, HTTP or web library, and nothing else of the coordinator.
"""
