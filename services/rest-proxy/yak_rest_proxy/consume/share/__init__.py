"""Share groups on the proxy: acquiring and acknowledging records at the partitions' leaders
(KIP-932's queues; docs/queues.md).

An acquire, from the route to the brokers: ``api/native/share_routes.py`` →
``share_consumer.ShareConsumers.acquire`` → one ShareFetch per leader broker of the requested
topics' partitions, concurrently (``yak.clients.broker.BrokerClient.share_fetch``) →
``acquired.acquired_records``: only the acquired offsets of the answered batches decoded. An
acknowledgement: ``ShareConsumers.acknowledge`` → ``acknowledgements.by_partition`` (each
partition once, with all its entries; the leader lists the refused ones) → one ShareAcknowledge
per leader.
Acknowledgements an acquire carries ride its ShareFetches (``riding_acks.RidingAcks``).
The share-partitions' state lives with the leaders (docs/decisions.md, "Share groups: where their
state lives"): nothing here is durable, and any proxy serves any member.

Layers (import contracts in pyproject): ``share_consumer`` over ``riding_acks`` over
``acknowledger`` over ``share_metadata``, ``acknowledgements``, ``acquired`` and ``share_stats``;
``acquired`` and ``acknowledgements`` are pure (no asyncio, no I/O).
"""
