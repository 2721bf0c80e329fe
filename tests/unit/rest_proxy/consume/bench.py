"""A test bench for consumer instances: an in-memory etcd on a fake clock, the real group
coordinator deciding assignments, a fake log in place of the brokers, and any number of
proxies (``Consumers``) sharing them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from yak.clock import FakeClock
from yak.errors import MetadataStoreError
from yak.filters import RecordFilter
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import GroupMember, GroupState, PartitionState, TopicRecord
from yak.metadata.store import Compare, KeyLike, KeyValue, Op, RangeResult, TxnResult, Watch
from yak.protocol.broker_models import OffsetResult
from yak.record import Record, RecordInput, encode_batch
from yak.types import TopicPartition
from yak_coordinator.election import Term
from yak_coordinator.groups.group_coordinator import GroupCoordinator
from yak_rest_proxy.consume.consumer import Consumers
from yak_rest_proxy.consume.reader import PartitionRead, whole_batches
from yak_rest_proxy.metrics import PollStats

KS = Keyspace("consumers")


class FakeLog:
    """Partitions as lists of records; a fetch answers at once with what is there. Each
    ``append`` is one record batch: a ``raw`` fetch answers the encoded batches from the one
    holding the offset on, as a broker does, cut as the reader cuts them (``whole_batches``)."""

    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, list[Record]] = {}
        self.batches: dict[TopicPartition, list[tuple[int, bytes]]] = {}
        self.stats = PollStats()
        #: Whether reads carry the bytes of their keys and values, as the reader's do.
        self.count_sizes = False
        #: Bytes cut off the end of a raw fetch's answer (a batch cut short, as a broker's
        #: byte limit may leave it).
        self.cut = 0
        #: The filter of each fetch, in order (None: unfiltered).
        self.filters: list[RecordFilter | None] = []

    def append(self, topic: str, partition: int, *values: str) -> None:
        records = self.partitions.setdefault(TopicPartition(topic, partition), [])
        base = len(records)
        for i, value in enumerate(values):
            headers = (("n", str(i).encode()),)
            records.append(Record(len(records), base, None, value.encode(), headers))
        inputs = [RecordInput(r.key, r.value, r.headers, r.timestamp) for r in records[base:]]
        self.batches.setdefault(TopicPartition(topic, partition), []).append(
            (base, encode_batch(inputs, base_offset=base))
        )

    async def fetch(
        self,
        positions: Sequence[tuple[str, int, int]],
        *,
        max_wait_ms: int,
        max_bytes: int,
        min_bytes: int = 1,
        owner: str | None = None,
        raw: bool = False,
        record_filter: RecordFilter | None = None,
    ) -> list[PartitionRead]:
        self.filters.append(record_filter)
        reads = []
        for topic, partition, offset in positions:
            if raw:
                reads.append(self._raw(topic, partition, offset, max_bytes))
                continue
            records = self.partitions.get(TopicPartition(topic, partition), [])[offset:]
            size = sum(len(r.value or b"") for r in records) if self.count_sizes else -1
            end = len(self.partitions.get(TopicPartition(topic, partition), []))
            if record_filter is not None:  # as the reader: kept records, position past all
                records = record_filter.select(records)
                size = sum(len(r.value or b"") for r in records) if self.count_sizes else -1
            reads.append(PartitionRead(topic, partition, records, end, size=size))
        return reads

    def _raw(self, topic: str, partition: int, offset: int, max_bytes: int) -> PartitionRead:
        batches = self.batches.get(TopicPartition(topic, partition), [])
        # From the batch holding the offset: the last one based at or below it.
        first = max((i for i, (base, _) in enumerate(batches) if base <= offset), default=0)
        data = b"".join(batch for _, batch in batches[first:])
        data = data[: len(data) - self.cut] if self.cut else data
        kept, next_offset = whole_batches(data, offset, max_bytes)
        end = len(self.partitions.get(TopicPartition(topic, partition), []))
        return PartitionRead(
            topic, partition, [], next_offset, end, 0, size=len(kept), batches=kept
        )

    async def list_offsets(self, topic: str, partition: int, timestamp: int | str) -> OffsetResult:
        end = len(self.partitions.get(TopicPartition(topic, partition), []))
        offset = 0 if timestamp == "earliest" else end
        return OffsetResult(topic=topic, partition=partition, timestamp=-1, offset=offset)


class ProxyStore:
    """One proxy's connection to the shared in-memory etcd: counts the calls it makes, can be
    cut (every call then fails, as for a proxy that crashed or lost etcd), and can make each
    transaction take ``txn_s`` of the fake clock (a write's round trip)."""

    def __init__(self, store: MemoryMetadataStore, clock: FakeClock | None = None) -> None:
        self._store = store
        self._clock = clock
        self.calls = 0
        self.cut = False
        self.txn_s = 0.0

    def _call(self) -> MemoryMetadataStore:
        if self.cut:
            raise MetadataStoreError("cut off")
        self.calls += 1
        return self._store

    async def get(self, key: KeyLike) -> KeyValue | None:
        return await self._call().get(key)

    async def range_prefix(self, prefix: KeyLike) -> RangeResult:
        return await self._call().range_prefix(prefix)

    async def put(self, key: KeyLike, value: bytes, *, lease: int | None = None) -> int:
        return await self._call().put(key, value, lease=lease)

    async def delete(self, key: KeyLike) -> bool:
        return await self._call().delete(key)

    async def delete_prefix(self, prefix: KeyLike) -> int:
        return await self._call().delete_prefix(prefix)

    async def txn(
        self, compares: Sequence[Compare], on_success: Sequence[Op], on_failure: Sequence[Op] = ()
    ) -> TxnResult:
        answer = await self._call().txn(compares, on_success, on_failure)
        if self.txn_s and self._clock is not None:
            self._clock.advance(self.txn_s)
        return answer

    async def grant_lease(self, ttl_s: int) -> int:
        return await self._call().grant_lease(ttl_s)

    async def keep_alive_once(self, lease_id: int) -> int:
        return await self._call().keep_alive_once(lease_id)

    async def revoke_lease(self, lease_id: int) -> None:
        await self._call().revoke_lease(lease_id)

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        return self._store.watch_prefix(prefix, start_revision)

    async def compact(self, revision: int) -> None:
        await self._call().compact(revision)

    async def aclose(self) -> None:
        pass


@dataclass
class Bench:
    store: MemoryMetadataStore
    clock: FakeClock
    cache: MetadataCache
    log: FakeLog = field(default_factory=FakeLog)
    proxies: list[Consumers] = field(default_factory=list)

    async def topic(self, name: str, partitions: int) -> None:
        record = TopicRecord(
            name=name, topic_id=name, partitions=partitions, replication_factor=1, created_at_ms=1
        )
        await self.store.put(KS.topic(name), record.encode())
        for p in range(partitions):
            state = PartitionState(topic=name, partition=p, leader=0, replicas=(0,), isr=(0,))
            await self.store.put(KS.partition(name, p), state.encode())
        await self.cache.wait_for_revision(self.store.revision)

    async def proxy(
        self, *, flush_interval_ms: int = 1_000, handoff_timeout_ms: int = 2_000
    ) -> tuple[Consumers, ProxyStore]:
        """A started proxy, named ``proxy-<n>`` in the positions records it holds."""
        store = ProxyStore(self.store, self.clock)
        proxy = Consumers(
            store,
            KS,
            self.cache,
            self.log,
            clock=self.clock,
            holder=f"proxy-{len(self.proxies)}",
            flush_interval_ms=flush_interval_ms,
            handoff_timeout_ms=handoff_timeout_ms,
        )
        await proxy.start()
        self.proxies.append(proxy)
        return proxy, store

    async def stop(self) -> None:
        for proxy in self.proxies:
            await proxy.stop()

    @staticmethod
    async def settle() -> None:
        """Let the watches deliver what was written (the in-memory store pushes at once)."""
        for _ in range(5):
            await asyncio.sleep(0)

    async def state_where(self, group: str, predicate: Callable[[GroupState], bool]) -> GroupState:
        """The group's state once ``predicate`` holds (read, then watch: no polling), once the
        proxies' watches saw it too."""
        key = KS.group_state(group)
        async with asyncio.timeout(5):
            read = await self.store.range_prefix(key)
            if read.kvs and predicate(state := GroupState.decode(read.kvs[0].value)):
                await self.settle()
                return state
            async with self.store.watch_prefix(key, read.revision + 1) as watch:
                async for event in watch:
                    if event.value and predicate(state := GroupState.decode(event.value)):
                        await self.settle()
                        return state
        raise AssertionError("the watch ended")


def member(member_id: str, **fields: object) -> GroupMember:
    fields.setdefault("auto_offset_reset", "earliest")
    return GroupMember(member_id=member_id, joined_at_ms=1, **fields)  # type: ignore[arg-type]


def granted(state: GroupState, member_id: str) -> set[TopicPartition]:
    return {
        TopicPartition(a.topic, p)
        for a in state.current_assignment.get(member_id, ())
        for p in a.partitions
    }


@asynccontextmanager
async def running_bench() -> AsyncIterator[Bench]:
    clock = FakeClock()
    store = MemoryMetadataStore(clock)
    revision = await store.put(KS.controller, b"{}")
    term = Term(epoch=revision, lease_id=0, fence=Compare.create_revision(KS.controller, revision))
    cache = MetadataCache(store, KS, clock=clock)
    await cache.start()
    task = asyncio.get_running_loop().create_task(
        GroupCoordinator(store, KS, cache, clock=clock).run(term)
    )
    bench = Bench(store, clock, cache)
    try:
        yield bench
    finally:
        await bench.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await cache.stop()
        await store.aclose()
