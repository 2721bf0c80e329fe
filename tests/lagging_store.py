"""``LaggingStore``: an in-memory metadata store whose watches hold their events while its
``gate`` is closed (a watch that lags etcd), counting the reads a test may care about."""

from __future__ import annotations

import asyncio

from yak.clock import Clock, FakeClock
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.store import KeyLike, KeyValue, RangeResult, Watch

__all__ = ["LaggingStore"]


class _GatedWatch(Watch):
    """The inner watch's events, each held until the gate is open."""

    def __init__(self, inner: Watch, gate: asyncio.Event) -> None:
        super().__init__(inner.prefix, inner.start_revision)
        self._inner = inner
        self._gate = gate
        self._pump: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        await self._inner.open()
        self._pump = asyncio.create_task(self._forward())

    async def _forward(self) -> None:
        async for event in self._inner:
            await self._gate.wait()
            self._push(event)

    async def _stop(self) -> None:
        await self._inner.aclose()
        if self._pump is not None:
            self._pump.cancel()


class LaggingStore(MemoryMetadataStore):
    """Watches deliver only while ``gate`` is set (it starts set); ``reads`` counts the gets
    and range reads. Leases run on a ``FakeClock`` unless given another clock."""

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(clock or FakeClock())
        self.gate = asyncio.Event()
        self.gate.set()
        self.reads = 0

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        return _GatedWatch(super().watch_prefix(prefix, start_revision), self.gate)

    async def range_prefix(self, prefix: KeyLike) -> RangeResult:
        self.reads += 1
        return await super().range_prefix(prefix)

    async def get(self, key: KeyLike) -> KeyValue | None:
        self.reads += 1
        return await super().get(key)
