"""Acknowledgements riding an acquire through scripted leaders (``share_fakes``): each
partition's entries inside its ShareFetch (no ShareAcknowledge sent), per-entry results in
order, refusals that do not stop the acquire, partitions named only by entries, a parked
fetch's broker answered apart, a leader that moved asked again."""

from __future__ import annotations

from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry

from tests.unit.rest_proxy.consume.share.share_fakes import (
    KS,
    ShareBrokers,
    share_cluster,
)
from yak.errors import InvalidRecordStateError, UnknownTopicOrPartitionError
from yak.protocol.kafka_share import AckBatch, AckType, ShareAcknowledgeRequest, ShareFetchRequest
from yak_rest_proxy.consume.share.acknowledgements import AckRange
from yak_rest_proxy.consume.share.share_consumer import Acquisition, ShareConsumers
from yak_rest_proxy.consume.share.share_stats import ShareStats
from yak_rest_proxy.topics import TopicLookup


async def _shares(brokers: ShareBrokers) -> AsyncIterator[ShareConsumers]:
    async with share_cluster() as (store, cache):
        shares = ShareConsumers(
            cache,
            TopicLookup(cache, store, KS, timeout_s=0.5),
            lambda broker: brokers.client(broker.url),
            node_id="n1",
            stats=ShareStats(CollectorRegistry()),
        )
        try:
            yield shares
        finally:
            await shares.aclose()
            await brokers.aclose()


def _offsets(got: Acquisition) -> list[tuple[int, int]]:
    return sorted((p.partition, r.offset) for p in got.partitions for r in p.records)


def _acks_sent(brokers: ShareBrokers) -> list[ShareAcknowledgeRequest]:
    return [r for _, r in brokers.requests if isinstance(r, ShareAcknowledgeRequest)]


def _fetches(brokers: ShareBrokers) -> list[ShareFetchRequest]:
    return [r for _, r in brokers.requests if isinstance(r, ShareFetchRequest)]


async def test_entries_ride_the_share_fetches_and_answer_beside_the_records() -> None:
    brokers = ShareBrokers({0: 3, 1: 3})
    async for shares in _shares(brokers):
        first = await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=1_000)
        assert len(_offsets(first)) == 6
        brokers.add(0, b"p0-3")
        brokers.requests.clear()
        entries = [
            AckRange("t", 0, 0, 2, AckType.ACCEPT),
            AckRange("t", 1, 0, 2, AckType.RELEASE),
        ]
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=10, timeout_ms=1_000, acknowledgements=entries
        )
        assert list(got.ack_results) == [None, None]
        assert _acks_sent(brokers) == []  # no ShareAcknowledge: the fetches carried them
        carried = {
            p.partition: p.acks for request in _fetches(brokers)[:2] for p in request.partitions
        }
        assert carried == {0: (AckBatch(0, 2, (1,)),), 1: (AckBatch(0, 2, (2,)),)}
        # accepted records are done, released ones came back: acquired again with count 2
        assert _offsets(got) == [(0, 3), (1, 0), (1, 1), (1, 2)]
        counts = {(p.partition, r.offset): c for p in got.partitions
                  for r, c in zip(p.records, p.delivery_counts, strict=True)}  # fmt: skip
        assert counts[(1, 0)] == 2
        assert counts[(0, 3)] == 1
        assert brokers.state[(0, 0)] == (None, 1, True)


async def test_a_refused_entry_is_reported_and_the_partition_still_acquires() -> None:
    brokers = ShareBrokers({0: 2, 1: 0})
    async for shares in _shares(brokers):
        await shares.acquire("g", "m1", ["t"], max_records=1, timeout_ms=1_000)  # holds p0@0
        entries = [AckRange("t", 0, 1, 1, AckType.ACCEPT)]  # p0@1: not held by m1
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=10, timeout_ms=1_000, acknowledgements=entries
        )
        assert isinstance(got.ack_results[0], InvalidRecordStateError)
        assert _offsets(got) == [(0, 1)]
        assert brokers.state[(0, 1)] == ("m1", 1, False)  # acquired, not accepted


async def test_every_entry_of_a_partition_rides_and_each_answers_alone() -> None:
    brokers = ShareBrokers({0: 3, 1: 0})
    async for shares in _shares(brokers):
        await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=1_000)
        brokers.requests.clear()
        entries = [
            AckRange("t", 0, 0, 0, AckType.ACCEPT),
            AckRange("t", 0, 5, 5, AckType.ACCEPT),  # never existed: refused alone
            AckRange("t", 0, 1, 2, AckType.ACCEPT),
        ]
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=10, timeout_ms=0, acknowledgements=entries
        )
        assert got.ack_results[0] is None
        assert got.ack_results[2] is None
        assert isinstance(got.ack_results[1], InvalidRecordStateError)
        assert _acks_sent(brokers) == []  # one fetch carried all three
        carried = [p.acks for r in _fetches(brokers) for p in r.partitions if p.acks]
        assert carried == [(AckBatch(0, 0, (1,)), AckBatch(5, 5, (1,)), AckBatch(1, 2, (1,)))]
        assert all(brokers.state[(0, o)][2] for o in range(3))


async def test_many_scattered_entries_go_in_one_request() -> None:
    brokers = ShareBrokers({0: 40, 1: 0})
    async for shares in _shares(brokers):
        await shares.acquire("g", "m1", ["t"], max_records=100, timeout_ms=1_000)
        brokers.requests.clear()
        entries = [AckRange("t", 0, o, o, AckType.ACCEPT) for o in range(0, 40, 2)]
        results = await shares.acknowledge("g", "m1", entries)
        assert results == [None] * 20
        (sent,) = _acks_sent(brokers)  # not one request per entry
        assert len(sent.partitions[0].acks) == 20
        assert [brokers.state[(0, o)][2] for o in range(4)] == [True, False, True, False]


async def test_an_entry_of_an_unknown_topic_is_answered_and_the_others_applied() -> None:
    brokers = ShareBrokers({0: 2, 1: 2})
    async for shares in _shares(brokers):
        await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=1_000)
        entries = [
            AckRange("t", 1, 0, 1, AckType.ACCEPT),
            AckRange("gone", 0, 0, 0, AckType.ACCEPT),
        ]
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=10, timeout_ms=0, acknowledgements=entries
        )
        assert got.ack_results[0] is None
        assert isinstance(got.ack_results[1], UnknownTopicOrPartitionError)
        assert brokers.state[(1, 0)][2]
        assert brokers.state[(1, 1)][2]


async def test_a_parked_fetchs_broker_gets_its_entries_apart() -> None:
    brokers = ShareBrokers({0: 2, 1: 2})
    async for shares in _shares(brokers):
        first = await shares.acquire("g", "m1", ["t"], max_records=2, timeout_ms=1_000)
        handed = {p for p, _ in _offsets(first)}
        (parked,) = {0, 1} - handed  # its broker's answer did not fit: parked for m1
        brokers.requests.clear()
        entries = [AckRange("t", parked, 0, 1, AckType.ACCEPT)]
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=2, timeout_ms=1_000, acknowledgements=entries
        )
        assert _offsets(got) == [(parked, 0), (parked, 1)]  # the parked answer, taken over
        assert list(got.ack_results) == [None]
        assert len(_acks_sent(brokers)) == 1  # no fetch to that broker: the entry went apart
        assert [r.partitions[0].partition for r in _fetches(brokers)] == [1 - parked]


async def test_an_entry_whose_leader_moved_is_sent_again() -> None:
    brokers = ShareBrokers({0: 2, 1: 0})
    async for shares in _shares(brokers):
        await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=1_000)
        brokers.not_leader_once.add(0)
        brokers.requests.clear()
        entries = [AckRange("t", 0, 0, 1, AckType.ACCEPT)]
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=10, timeout_ms=0, acknowledgements=entries
        )
        assert list(got.ack_results) == [None]
        assert brokers.state[(0, 0)][2]
        assert brokers.state[(0, 1)][2]
        assert len(_acks_sent(brokers)) == 1  # the second try, on its own


async def test_an_empty_answer_to_entries_is_followed_by_the_long_poll() -> None:
    brokers = ShareBrokers({0: 1, 1: 0})
    async for shares in _shares(brokers):
        await shares.acquire("g", "m1", ["t"], max_records=10, timeout_ms=1_000)
        brokers.requests.clear()
        entries = [AckRange("t", 0, 0, 0, AckType.ACCEPT)]
        got = await shares.acquire(
            "g", "m1", ["t"], max_records=10, timeout_ms=200, acknowledgements=entries
        )
        assert _offsets(got) == []
        assert list(got.ack_results) == [None]
        sent = [(p.partition, r.max_wait_ms > 0, bool(p.acks))
                for r in _fetches(brokers) for p in r.partitions]  # fmt: skip
        # broker 1 still has the first acquire's long poll, taken over: not asked again
        assert sorted(sent) == [(0, False, True), (0, True, False)]
