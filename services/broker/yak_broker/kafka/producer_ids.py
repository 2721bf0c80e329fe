"""Producer ids for InitProducerId: blocks reserved in etcd by compare-and-swap on
``producers/next-id``.

The same key and protocol the rest-proxy's idempotent producer sessions use
(``yak_rest_proxy.produce.producer_ids``), so an id is never handed out twice, whichever door
a producer came in by: read ``ProducerIdBlock``, write ``next_id + block_size`` in a transaction
that compares the key's ``mod_revision`` (or its absence), retry on a lost race. Ids of a block
this broker did not use before it stopped are never reused (gaps are harmless; ids are 63-bit).
Services do not import each other, so this is the second copy of that protocol: it belongs in
``shared/yak/metadata`` once both owners move it there. Single event loop; concurrent callers
share one refill.
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
    """Allocates producer ids for one broker from blocks reserved in the metadata store."""

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
