"""MetadataCache against the in-memory store: load, follow, compaction, malformed values."""

from __future__ import annotations

import asyncio

import pytest

from yak.clock import FakeClock
from yak.errors import KafkaTimeoutError, MetadataStoreError, RevisionCompactedError
from yak.metadata.cache import MetadataCache
from yak.metadata.keyspace import Keyspace, ParsedKey
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import (
    BrokerRecord,
    BrokerRegistration,
    PartitionState,
    ShareGroupRecord,
    TopicRecord,
)
from yak.metadata.snapshot import ClusterSnapshot
from yak.metadata.store import KeyLike, RangeResult, Watch, as_key

KS = Keyspace("c1")


def broker(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id, host="127.0.0.1", port=9000 + broker_id, started_at_ms=1
    )


def topic(name: str, partitions: int = 2) -> TopicRecord:
    return TopicRecord(
        name=name,
        topic_id=f"id-{name}",
        partitions=partitions,
        replication_factor=1,
        created_at_ms=1,
    )


def partition(name: str, p: int, leader: int) -> PartitionState:
    return PartitionState(topic=name, partition=p, leader=leader, replicas=(leader,), isr=(leader,))


async def test_loads_existing_metadata_then_follows_changes() -> None:
    store = MemoryMetadataStore(FakeClock())
    await store.put(KS.broker(1), broker(1).encode())
    await store.put(KS.topic("orders"), topic("orders").encode())
    await store.put(KS.partition("orders", 0), partition("orders", 0, 1).encode())
    seen: list[ParsedKey] = []
    cache = MetadataCache(store, KS, on_change=seen.append)
    await cache.start()
    try:
        snap = cache.snapshot
        assert set(snap.brokers) == {1}
        assert snap.topics["orders"].partitions == 2
        assert snap.leader_of("orders", 0) == broker(1)
        assert snap.leader_of("orders", 1) is None

        revision = await store.put(KS.partition("orders", 1), partition("orders", 1, 2).encode())
        await store.put(KS.broker(2), broker(2).encode())
        snap = await cache.wait_for(lambda s: 2 in s.brokers, timeout_s=5)
        assert snap.revision > revision
        assert snap.leader_of("orders", 1) == broker(2)
        assert [p.partition for p in snap.partitions_of("orders")] == [0, 1]

        await store.delete(KS.broker(1))
        snap = await cache.wait_for(lambda s: 1 not in s.brokers, timeout_s=5)
        assert snap.leader_of("orders", 0) is None
        assert {key.broker_id for key in seen if key.broker_id is not None} == {1, 2}
    finally:
        await cache.stop()


async def test_broker_records_are_followed_apart_from_registrations() -> None:
    store = MemoryMetadataStore(FakeClock())
    record = BrokerRecord(
        broker_id=3,
        host="h",
        port=9003,
        first_registered_ms=1,
        started_at_ms=1,
        registered=False,
        last_seen_ms=7,
    )
    await store.put(KS.broker_record(3), record.encode())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        assert cache.snapshot.broker_records == {3: record}
        assert cache.snapshot.brokers == {}
        await store.put(KS.broker(3), broker(3).encode())
        snap = await cache.wait_for(lambda s: 3 in s.brokers, timeout_s=5)
        assert snap.broker_records == {3: record}
        await store.delete(KS.broker_record(3))
        snap = await cache.wait_for(lambda s: not s.broker_records, timeout_s=5)
        assert set(snap.brokers) == {3}
    finally:
        await cache.stop()


async def test_share_groups_are_loaded_and_followed() -> None:
    store = MemoryMetadataStore(FakeClock())
    jobs = ShareGroupRecord(name="jobs", created_at_ms=1, dead_letter_topic="jobs-dlq")
    await store.put(KS.share_group("jobs"), jobs.encode())
    cache = MetadataCache(store, KS)
    seen: list[ParsedKey | None] = []
    cache.subscribe(seen.append)
    await cache.start()
    try:
        assert cache.snapshot.share_groups == {"jobs": jobs}
        mail = ShareGroupRecord(name="mail", created_at_ms=2, max_delivery_attempts=3)
        await store.put(KS.share_group("mail"), mail.encode())
        snap = await cache.wait_for(lambda s: "mail" in s.share_groups, timeout_s=5)
        assert snap.share_groups["mail"].max_delivery_attempts == 3
        await store.delete(KS.share_group("jobs"))
        snap = await cache.wait_for(lambda s: "jobs" not in s.share_groups, timeout_s=5)
        assert set(snap.share_groups) == {"mail"}
        assert [k.group for k in seen if k is not None] == ["mail", "jobs"]
    finally:
        await cache.stop()


async def test_snapshots_are_immutable_and_replaced_on_change() -> None:
    store = MemoryMetadataStore(FakeClock())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        before = cache.snapshot
        revision = await store.put(KS.topic("t"), topic("t").encode())
        after = await cache.wait_for_revision(revision, timeout_s=5)
        assert "t" not in before.topics
        assert "t" in after.topics
        with pytest.raises(TypeError):
            after.topics["x"] = topic("x")  # type: ignore[index]
    finally:
        await cache.stop()


async def test_keys_of_other_clusters_and_other_kinds_are_ignored() -> None:
    store = MemoryMetadataStore(FakeClock())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        await store.put(Keyspace("other").topic("t"), topic("t").encode())
        revision = await store.put(KS.committed_offset("g", "t", 0), b'{"offset": 5}')
        snap = await cache.wait_for_revision(revision, timeout_s=5)
        assert snap.topics == {}
    finally:
        await cache.stop()


async def test_a_malformed_value_is_treated_as_absent(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryMetadataStore(FakeClock())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        await store.put(KS.topic("t"), topic("t").encode())
        revision = await store.put(KS.topic("t"), b'{"name": "t"}')
        snap = await cache.wait_for_revision(revision, timeout_s=5)
        assert "t" not in snap.topics
        assert "malformed metadata" in caplog.text
    finally:
        await cache.stop()


class _FailingWatch(Watch):
    def __init__(self, prefix: bytes, start: int | None, error: MetadataStoreError) -> None:
        super().__init__(prefix, start)
        self.error = error

    async def _start(self) -> None:
        self._finish(self.error)

    async def _stop(self) -> None:
        pass


class FlakyStore(MemoryMetadataStore):
    """An in-memory store whose next watches fail with the queued errors."""

    def __init__(self, clock: FakeClock, errors: list[MetadataStoreError]) -> None:
        super().__init__(clock)
        self.errors = errors
        self.failed = asyncio.Event()
        self.range_reads = 0

    def watch_prefix(self, prefix: KeyLike, start_revision: int | None = None) -> Watch:
        if self.errors:
            self.failed.set()
            return _FailingWatch(as_key(prefix), start_revision, self.errors.pop(0))
        return super().watch_prefix(prefix, start_revision)

    async def range_prefix(self, prefix: KeyLike) -> RangeResult:
        self.range_reads += 1
        return await super().range_prefix(prefix)


async def test_reloads_when_its_watch_falls_behind_compaction() -> None:
    store = FlakyStore(FakeClock(), [RevisionCompactedError("compacted", revision=1)])
    reloads: list[ClusterSnapshot] = []
    cache = MetadataCache(store, KS, on_reload=reloads.append)
    await cache.start()
    assert reloads == []  # the first load is no reload
    try:
        # Written before the follower runs: only the reload after the compaction error sees it.
        await store.put(KS.topic("early"), topic("early").encode())
        await cache.wait_for(lambda s: "early" in s.topics, timeout_s=5)
        assert store.range_reads == 2
        assert [set(r.topics) for r in reloads] == [{"early"}]  # events may have been missed
        revision = await store.put(KS.topic("late"), topic("late").encode())
        snap = await cache.wait_for_revision(revision, timeout_s=5)
        assert set(snap.topics) == {"early", "late"}
    finally:
        await cache.stop()


async def test_wait_for_revision_times_out_with_a_typed_error() -> None:
    store = MemoryMetadataStore(FakeClock())
    cache = MetadataCache(store, KS)
    await cache.start()
    try:
        with pytest.raises(KafkaTimeoutError, match="waited"):
            await cache.wait_for_revision(store.revision + 10, timeout_s=0.05)
    finally:
        await cache.stop()


async def test_watch_failure_is_retried_from_the_last_revision() -> None:
    clock = FakeClock()
    store = FlakyStore(clock, [MetadataStoreError("connection lost")])
    cache = MetadataCache(store, KS, clock=clock)
    await cache.start()
    try:
        await store.failed.wait()
        await asyncio.sleep(0)  # let the follower see the failure and park in its backoff
        assert bool(cache.connected) is False
        await store.put(KS.topic("missed"), topic("missed").encode())
        assert "missed" not in cache.snapshot.topics
        clock.advance(1.0)  # the backoff ends; the watch resumes from the last revision + 1
        snap = await cache.wait_for(lambda s: "missed" in s.topics, timeout_s=5)
        assert cache.connected
        assert store.range_reads == 1  # resumed, not reloaded
        assert snap.revision == store.revision
    finally:
        await cache.stop()
