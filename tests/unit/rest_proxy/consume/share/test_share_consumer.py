"""Share-group acquires and acknowledgements through scripted leaders (``share_fakes``): one
ShareFetch per leader, only acquired offsets handed out, parked fetches taken over, leaders that
moved retried once, checks before any broker call, per-entry acknowledgement results."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.rest_proxy.consume.share.share_fakes import (
    KS,
    TOPIC_ID,
    ShareBrokers,
    share_cluster,
)
from yak.errors import (
    GroupIdNotFoundError,
    InvalidFilterError,
    InvalidRecordStateError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from yak.metadata.cache import MetadataCache
from yak.metadata.memory_store import MemoryMetadataStore
from yak.metadata.models import ShareGroupRecord
from yak.protocol.kafka_share import AckType, ShareAcknowledgeRequest, ShareFetchRequest
from yak_rest_proxy.consume.share.acknowledgements import AckRange
from yak_rest_proxy.consume.share.share_consumer import Acquisition, ShareConsumers
from yak_rest_proxy.consume.share.share_stats import ShareStats
from yak_rest_proxy.topics import TopicLookup

Cluster = tuple[MemoryMetadataStore, MetadataCache, ShareBrokers, ShareConsumers]


async def _cluster(
    brokers: ShareBrokers, *, group: bool = True, keep_s: float = 30.0
) -> AsyncIterator[Cluster]:
    async with share_cluster(group=group) as (store, cache):
        shares = ShareConsumers(
            cache,
            TopicLookup(cache, store, KS, timeout_s=0.5),
            lambda broker: brokers.client(broker.url),
            node_id="n1",
            stats=ShareStats(CollectorRegistry()),
            keep_s=keep_s,
        )
        try:
            yield store, cache, brokers, shares
        finally:
            await shares.aclose()
            await brokers.aclose()


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async for made in _cluster(ShareBrokers()):
        yield made


def _got(acquisition: Acquisition) -> list[tuple[int, int, bytes | None, int]]:
    return sorted(
        (part.partition, record.offset, record.value, count)
        for part in acquisition.partitions
        for record, count in zip(part.records, part.delivery_counts, strict=True)
    )


def _fetches(brokers: ShareBrokers) -> list[tuple[int, ShareFetchRequest]]:
    return [(b, r) for b, r in brokers.requests if isinstance(r, ShareFetchRequest)]


async def test_one_share_fetch_per_leader_and_only_acquired_offsets(cluster: Cluster) -> None:
    _, _, brokers, shares = cluster
    brokers.state[(0, 1)] = ("someone-else", 1, False)
    got = await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=1_000, filter=None)
    assert _got(got) == [
        (0, 0, b"p0-0", 1),
        (0, 2, b"p0-2", 1),
        (1, 0, b"p1-0", 1),
        (1, 1, b"p1-1", 1),
        (1, 2, b"p1-2", 1),
    ]
    assert (got.member_id, got.lock_timeout_ms, got.errors) == ("m1", 30_000, [])
    fetches = _fetches(brokers)
    assert sorted(b for b, _ in fetches) == [0, 1]
    for broker_id, request in fetches:
        assert [(p.topic_id, p.partition) for p in request.partitions] == [(TOPIC_ID, broker_id)]
        assert (request.group_id, request.member_id, request.max_records) == ("g", "m1", 10)


async def test_the_filter_and_limits_travel_to_the_leaders(cluster: Cluster) -> None:
    _, _, brokers, shares = cluster
    text = 'key startswith "a"'
    await shares.acquire("g", "m1", ["t"], max_records=7, timeout_ms=250, filter=text)
    for _, request in _fetches(brokers):
        assert (request.filter, request.max_wait_ms, request.batch_size) == (text, 250, 7)


async def test_an_unknown_share_group_is_not_found_before_any_broker_call() -> None:
    async for _, _, brokers, shares in _cluster(ShareBrokers(), group=False):
        with pytest.raises(GroupIdNotFoundError):
            await shares.acquire("g", "m1", ["t"], max_records=1, timeout_ms=0)
        with pytest.raises(GroupIdNotFoundError):
            await shares.acknowledge("g", "m1", [AckRange("t", 0, 0, 0, AckType.ACCEPT)])
        assert brokers.requests == []


async def test_a_group_made_a_moment_ago_is_found_after_a_catch_up() -> None:
    async for store, cache, _, shares in _cluster(ShareBrokers(), group=False):
        await store.put(KS.share_group("g"), ShareGroupRecord(name="g", created_at_ms=0).encode())
        got = await shares.acquire("g", "m1", ["t"], max_records=1, timeout_ms=0)
        assert got.records >= 1
        assert "g" in cache.snapshot.share_groups


async def test_a_malformed_filter_fails_with_its_position_before_any_broker_call(
    cluster: Cluster,
) -> None:
    _, _, brokers, shares = cluster
    with pytest.raises(InvalidFilterError) as caught:
        await shares.acquire("g", "m1", ["t"], max_records=1, timeout_ms=0, filter="key ==")
    assert "position" in caught.value.details
    assert brokers.requests == []


async def test_unknown_topics_and_bad_member_ids_are_refused(cluster: Cluster) -> None:
    _, _, brokers, shares = cluster
    with pytest.raises(UnknownTopicOrPartitionError):
        await shares.acquire("g", "m1", ["nope"], max_records=1, timeout_ms=0)
    with pytest.raises(InvalidRequestError):
        await shares.acquire("g", "bad/id", ["t"], max_records=1, timeout_ms=0)
    assert brokers.requests == []


async def test_a_parked_fetch_is_taken_over_by_the_next_acquire() -> None:
    brokers = ShareBrokers()
    async for _, _, _, shares in _cluster(brokers):
        brokers.hold[1] = held = asyncio.Event()
        first = await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=5_000)
        assert {p for p, *_ in _got(first)} == {0}  # broker 1 is still answering
        held.set()
        second = await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=5_000)
        assert [(p, o) for p, o, *_ in _got(second)] == [(1, 0), (1, 1), (1, 2)]
        assert [b for b, _ in _fetches(brokers)].count(1) == 1  # taken over, not sent again


async def test_a_leader_that_moved_is_asked_again_once() -> None:
    brokers = ShareBrokers({0: 2, 1: 0})
    async for _, _, _, shares in _cluster(brokers):
        brokers.not_leader_once.add(0)
        got = await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=300)
        assert [(p, o) for p, o, *_ in _got(got)] == [(0, 0), (0, 1)]
        assert [b for b, _ in _fetches(brokers)].count(0) == 2


async def test_partitions_that_still_fail_are_reported_beside_the_records() -> None:
    brokers = ShareBrokers({0: 0, 1: 1})
    async for _, _, _, shares in _cluster(brokers):
        brokers.not_leader_once.add(0)
        got = await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=0)
        assert [(p, o) for p, o, *_ in _got(got)] == [(1, 0)]
        assert [(t, p, e.code) for t, p, e in got.errors] == [("t", 0, "NOT_LEADER_OR_FOLLOWER")]


async def test_acknowledgements_answer_per_entry_and_a_failing_one_changes_nothing(
    cluster: Cluster,
) -> None:
    _, _, brokers, shares = cluster
    await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=0)
    results = await shares.acknowledge(
        "g",
        "m1",
        [
            AckRange("t", 0, 0, 1, AckType.ACCEPT),
            AckRange("t", 0, 7, 7, AckType.ACCEPT),  # never acquired
            AckRange("t", 1, 0, 0, AckType.RELEASE),
            AckRange("nope", 0, 0, 0, AckType.ACCEPT),
        ],
    )
    assert [None if r is None else type(r) for r in results] == [
        None,
        InvalidRecordStateError,
        None,
        UnknownTopicOrPartitionError,
    ]
    assert brokers.held("m1") == [(0, 2), (1, 1), (1, 2)]
    acks = [r for _, r in brokers.requests if isinstance(r, ShareAcknowledgeRequest)]
    assert len(acks) == 2  # one per leader, partition 0 with both its entries
    assert sorted(len(p.acks) for r in acks for p in r.partitions) == [1, 2]


async def test_another_members_records_cannot_be_acknowledged(cluster: Cluster) -> None:
    _, _, brokers, shares = cluster
    await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=0)
    (error,) = await shares.acknowledge("g", "m2", [AckRange("t", 0, 0, 0, AckType.ACCEPT)])
    assert isinstance(error, InvalidRecordStateError)
    assert (0, 0) in brokers.held("m1")


async def test_parked_records_nobody_takes_are_released() -> None:
    brokers = ShareBrokers()
    async for _, _, _, shares in _cluster(brokers, keep_s=0.05):
        brokers.hold[1] = held = asyncio.Event()
        await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=5_000)
        held.set()
        brokers.acked.clear()
        await asyncio.wait_for(brokers.acked.wait(), 5)
        assert [k for k in brokers.held("m1") if k[0] == 1] == []
        assert brokers.state[(1, 0)] == (None, 1, False)  # available again, counted once


async def test_requests_and_records_are_counted(cluster: Cluster) -> None:
    _, _, _, shares = cluster
    await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=0)
    await shares.acknowledge("g", "m1", [AckRange("t", 0, 0, 2, AckType.ACCEPT)])
    with pytest.raises(GroupIdNotFoundError):
        await shares.acquire("nope", "m1", ["t"], max_records=1, timeout_ms=0)
    registry = shares.stats.registry

    def sample(name: str, labels: dict[str, str]) -> float | None:
        return registry.get_sample_value(name, labels)

    requests = "yak_proxy_share_requests_total"
    assert sample(requests, {"operation": "acquire", "outcome": "ok"}) == 1
    assert sample(requests, {"operation": "acquire", "outcome": "GROUP_ID_NOT_FOUND"}) == 1
    assert sample(requests, {"operation": "acknowledge", "outcome": "ok"}) == 1
    assert sample("yak_proxy_share_records_total", {"operation": "acquire"}) == 6
    assert sample("yak_proxy_share_records_total", {"operation": "accept"}) == 1
    assert sample("yak_proxy_share_request_seconds_count", {"operation": "acquire"}) == 2
