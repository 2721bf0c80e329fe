"""``CatchUp``: wait, bounded, until a ``MetadataCache`` holds what etcd holds under some keys.

A service answers from its cache, which follows etcd through a watch and so lags it by the
watch's delivery time. A request naming something the cache lacks (a topic made a moment ago
through another service, its partition states written in the revision after its record, a
leader that moved) reads those keys from etcd and waits until the watch has delivered their
newest change; keys etcd does not hold answer at once: the miss stands.

It does not wait for etcd's revision of now. Other clusters on the same etcd (each under its
own ``/yak/<cluster-id>/``), or a schema registry with its own cluster id, move that revision
with writes this cluster's watch never sees, so such a wait lasted until its timeout whenever
one of them wrote last. etcd's progress request would tell how far a watch has come, but etcd
before 3.4.24 and 3.5.8 can answer it ahead of events still queued (etcd-io/etcd#15248), and
Debian 12 ships 3.4.23.

A failure to read etcd, or a watch that stays behind past the timeout, leaves the cache as it
is: the caller answers from what it has. Concurrent catch-ups of the same keys share one read.
Single event loop.
"""

from __future__ import annotations

import asyncio

from yak.errors import KafkaTimeoutError, MetadataStoreError
from yak.metadata.cache import MetadataCache
from yak.metadata.store import MetadataStore

__all__ = ["CatchUp"]


class CatchUp:
    """Bounded catch-ups of ``cache`` with ``store`` on named keys (see the module doc)."""

    def __init__(self, cache: MetadataCache, store: MetadataStore, *, timeout_s: float) -> None:
        self._cache = cache
        self._store = store
        self._timeout_s = timeout_s
        self._syncs: dict[frozenset[str], asyncio.Future[None]] = {}

    async def sync(self, *wanted: str) -> None:
        """Wait (at most the timeout) until the cache holds what etcd holds now under each of
        ``wanted``: keys, or prefixes (a name that ends in ``/``)."""
        keys = frozenset(wanted)
        if not keys:
            return
        sync = self._syncs.get(keys)
        if sync is None:
            sync = self._syncs[keys] = asyncio.ensure_future(self._catch_up(keys))
            sync.add_done_callback(lambda done: self._done(keys, done))
        await asyncio.shield(sync)

    def _done(self, keys: frozenset[str], sync: asyncio.Future[None]) -> None:
        if self._syncs.get(keys) is sync:
            del self._syncs[keys]
        if not sync.cancelled():
            sync.exception()

    async def _catch_up(self, keys: frozenset[str]) -> None:
        try:
            async with asyncio.timeout(self._timeout_s):
                newest = max(await asyncio.gather(*(self._newest(key) for key in keys)))
            if newest > self._cache.revision:
                await self._cache.wait_for_revision(newest, self._timeout_s)
        except (TimeoutError, KafkaTimeoutError, MetadataStoreError):
            return

    async def _newest(self, key: str) -> int:
        """The revision of the newest change etcd holds under ``key`` (0: nothing there)."""
        if key.endswith("/"):
            kvs = (await self._store.range_prefix(key)).kvs
            return max((kv.mod_revision for kv in kvs), default=0)
        kv = await self._store.get(key)
        return 0 if kv is None else kv.mod_revision
