"""Sending one client-built batch to its partition's leader, retrying the same bytes.

The idempotent produce sessions of the native API encode exactly the batch the client asked
for (its producer id, epoch and base sequence) and send it here, bypassing the batching
producer: a retriable failure (a new leader, a timeout, a lost connection) sends the *same*
bytes again once the metadata moved, at most every 100 ms, until ``timeout_s``. The broker's
duplicate detection makes every retry — by the proxy or by the client through any proxy —
return the first append's offsets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from yak.clock import Clock
from yak.errors import KafkaTimeoutError, YakError
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.protocol.broker_wire import ProduceResult
from yak_rest_proxy.brokers import BrokerPool

__all__ = ["send_batch"]

_BACKOFF_S = 0.1


async def send_batch(
    cache: MetadataCache,
    brokers: BrokerPool,
    topic: str,
    partition: int,
    batch: bytes,
    *,
    acks: int,
    timeout_s: float,
    clock: Clock,
) -> ProduceResult:
    """Append ``batch`` at the leader; its result, or the last error once out of time."""
    deadline = clock.monotonic() + timeout_s
    while True:
        seen = cache.snapshot.revision
        try:
            _, client = brokers.leader(topic, partition)
            return await client.produce_one(topic, partition, batch, acks=acks)
        except YakError as exc:
            if not exc.retriable:
                raise
            if clock.monotonic() >= deadline:
                raise KafkaTimeoutError(f"not delivered in time: {exc.message}") from exc

        with contextlib.suppress(YakError, TimeoutError):
            await cache.wait_for(_past(seen), _BACKOFF_S)


def _past(revision: int) -> Callable[[ClusterSnapshot], bool]:
    def moved(snapshot: ClusterSnapshot) -> bool:
        return snapshot.revision > revision

    return moved
