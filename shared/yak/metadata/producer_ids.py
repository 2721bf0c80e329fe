"""Producer ids from etcd: blocks of ids handed out by compare-and-swap on ``producers/next-id``.

Kafka's brokers get blocks of producer ids from the controller (KIP-730); here every process
that hands out ids — the rest-proxies for their idempotent producer sessions, the brokers'
Kafka listeners for InitProducerId — takes a block straight from the metadata store: read
``ProducerIdBlock``, then write ``next_id + block_size`` in a transaction that compares the
key's ``mod_revision`` (or its absence), retrying on a lost race. One key and one protocol, so
an id is never handed out twice, whichever door a producer came in by. Ids of a block a process
did not use before it stopped are never reused (gaps are harmless; ids are 63-bit). Single
event loop; concurrent callers share one refill.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from yak.errors import MetadataStoreError
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import ProducerIdBlock
from yak.metadata.store import Compare, MetadataStore, PutOp

__all__ = ["ProducerIds"]

_MAX_ATTEMPTS = 20


class ProducerIds:
    """Allocates producer ids for one process from blocks reserved in the metadata store
    (``store`` is asked for the current store at each refill: a broker's is replaced when it
    reconnects)."""

    def __init__(
        self, store: Callable[[], MetadataStore], keyspace: Keyspace, *, block_size: int = 100
    ) -> None:
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self._store = store
        self._key = keyspace.producer_id_block
        self._block_size = block_size
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def allocate(self) -> int:
        """A producer id no other process (and no earlier call) was given."""
        async with self._lock:
            if self._next >= self._end:
                self._next, self._end = await self._reserve()
            allocated = self._next
            self._next += 1
            return allocated

    async def _reserve(self) -> tuple[int, int]:
        store = self._store()
        for _ in range(_MAX_ATTEMPTS):
            current = await store.get(self._key)
            start = 0 if current is None else ProducerIdBlock.decode(current.value).next_id
            end = start + self._block_size
            guard = (
                Compare.absent(self._key)
                if current is None
                else Compare.mod_revision(self._key, current.mod_revision)
            )
            result = await store.txn(
                [guard], [PutOp(self._key, ProducerIdBlock(next_id=end).encode())]
            )
            if result.succeeded:
                return start, end
        raise MetadataStoreError(f"could not reserve producer ids after {_MAX_ATTEMPTS} attempts")
