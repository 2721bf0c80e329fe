"""``ConsumerFetchSessions`` alone: session ids and epochs, Kafka's eviction rules, what a round
finds due (without allocating per partition on an idle one), what an incremental answer
carries, fairness, the session's one waiter, and the metrics it exposes."""

from __future__ import annotations

import random
import tracemalloc
from dataclasses import dataclass
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from yak.protocol.broker_wire import FetchedPartition, FetchPartition, PartitionError
from yak.types import TopicPartition
from yak_broker.kafka.consumer_fetch_sessions import (
    ConsumerFetchSession,
    ConsumerFetchSessions,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    register_metrics,
)
from yak_broker.replication.fetch_waiter import FetchWaiters
from yak_broker.replication.state.fetch_metadata import MAX_EPOCH


@dataclass
class FakeLog:
    high_watermark: int = 0
    log_start_offset: int = 0


@dataclass
class FakeLeader:
    leader_epoch: int = 0

    def check_fetch_epoch(self, epoch: int) -> int | None:
        return None if epoch in (-1, self.leader_epoch) else 74


@dataclass
class FakeReplica:
    log: FakeLog
    leader: FakeLeader | None


def cache(max_sessions: int = 1000, **kwargs: Any) -> ConsumerFetchSessions:
    return ConsumerFetchSessions(
        FetchWaiters(), max_sessions=max_sessions, rng=random.Random(7), **kwargs
    )


def named(topic: str, *partitions: int, offset: int = 0) -> list[FetchPartition]:
    return [FetchPartition(topic, p, offset) for p in partitions]


def opened(sessions: ConsumerFetchSessions, size: int, now_ms: int = 0) -> ConsumerFetchSession:
    session = sessions.open(0, 0, size, now_ms)
    assert session is not None
    return session


def told(session: ConsumerFetchSession, high_watermark: int = 0) -> None:
    """The full answer: every partition told ``high_watermark`` (and log start 0)."""
    session.commit(
        [
            FetchedPartition(topic, partition, high_watermark, high_watermark, 0)
            for topic, partition in session.partitions
        ]
    )


def test_ids_epochs_errors_and_the_final_epoch() -> None:
    sessions = cache()
    session = opened(sessions, 1)
    assert 0 < session.session_id < MAX_EPOCH
    assert sessions.open(session.session_id, 1, 0, 1) is session
    with pytest.raises(InvalidFetchSessionEpochError) as wrong:
        sessions.open(session.session_id, 1, 0, 2)  # a replayed request
    assert wrong.value.kafka_code == 71
    session.epoch = MAX_EPOCH
    sessions.open(session.session_id, MAX_EPOCH, 0, 3)
    assert session.epoch == 1  # wraps to 1, never to the initial 0
    assert sessions.open(session.session_id, -1, 1, 4) is None  # the final epoch closes it
    assert session.closed
    with pytest.raises(FetchSessionIdNotFoundError) as unknown:
        sessions.open(session.session_id, 1, 0, 5)
    assert unknown.value.kafka_code == 70
    assert sessions.fetches == {"sessionless": 1, "full": 1, "incremental": 2, "refused": 2}


def test_a_full_fetch_naming_a_session_replaces_it() -> None:
    sessions = cache()
    old = opened(sessions, 1)
    new = sessions.open(old.session_id, 0, 1, 1)
    assert new is not None
    assert new is not old
    assert old.closed
    assert len(sessions) == 1


def test_eviction_takes_a_stale_session_first_then_a_smaller_one() -> None:
    sessions = cache(max_sessions=2, eviction_ms=1_000)
    big = opened(sessions, 5, now_ms=0)
    big.update(named("t", *range(5)))
    small = opened(sessions, 2, now_ms=10)
    small.update(named("t", 0, 1))
    assert sessions.open(0, 0, 2, 20) is None  # not bigger than the smallest: sessionless
    bigger = opened(sessions, 3, now_ms=30)
    assert (small.closed, big.closed) == (True, False)
    bigger.update(named("t", 0, 1, 2))
    sessions.open(bigger.session_id, 1, 0, 1_500)  # used: ``big`` is now the LRU, and stale
    tiny = opened(sessions, 1, now_ms=1_600)
    assert (big.closed, bigger.closed) == (True, False)
    assert tiny.session_id != bigger.session_id
    assert sessions.evictions == 2


def test_no_slots_means_no_sessions() -> None:
    sessions = cache(max_sessions=0)
    assert sessions.open(0, 0, 10, 0) is None
    assert sessions.fetches["sessionless"] == 1


def test_a_round_reads_only_what_the_consumer_does_not_know() -> None:
    sessions = cache()
    session = opened(sessions, 4)
    session.update(named("t", 0, 1, 2, 3, offset=5))
    hosted = {TopicPartition("t", p): FakeReplica(FakeLog(5), FakeLeader()) for p in range(3)}
    replicas = cast(Any, hosted)
    assert len(session.due(replicas)) == 4  # all named by the full fetch
    told(session, high_watermark=5)
    session.partitions[("t", 3)].failed = True
    hosted[TopicPartition("t", 0)].log.high_watermark = 6  # an append
    hosted[TopicPartition("t", 1)].leader = FakeLeader(leader_epoch=3)
    session.partitions[("t", 1)].leader_epoch = 2  # fenced now
    assert [c.tp.partition for c in session.due(replicas)] == [0, 1, 3]  # 3: not hosted, failed
    session.update(named("t", 2, offset=5))
    assert [c.tp.partition for c in session.due(replicas)] == [0, 1, 2, 3]


def test_an_idle_check_allocates_nothing_per_partition() -> None:
    sessions = cache()
    session = opened(sessions, 2000)
    session.update(named("t", *range(2000)))
    hosted = cast(
        Any,
        {TopicPartition("t", p): FakeReplica(FakeLog(0), FakeLeader()) for p in range(2000)},
    )
    told(session)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        assert session.due(hosted) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak - before < 2_000  # one empty list; a tuple per partition would be > 100 KB


def test_an_incremental_answer_carries_only_news_and_data_rotates_to_the_end() -> None:
    session = opened(cache(), 3)
    session.update(named("t", 0, 1, 2))
    told(session, high_watermark=4)
    cached = session.partitions[("t", 0)]
    assert not cached.must_answer(FetchedPartition("t", 0, 4, 4, 0))
    assert cached.must_answer(FetchedPartition("t", 0, 5, 5, 0))
    assert cached.must_answer(FetchedPartition("t", 0, 4, 4, 1))
    assert cached.must_answer(FetchedPartition("t", 0, 4, 4, 0, records=b"x"))
    error = PartitionError("NOT_LEADER_OR_FOLLOWER", "moved")
    assert cached.must_answer(FetchedPartition("t", 0, error=error))
    session.commit([FetchedPartition("t", 0, 5, 5, 0, records=b"x")])
    assert list(session.partitions) == [("t", 1), ("t", 2), ("t", 0)]


def test_forgetting_keeps_the_topics_count() -> None:
    session = opened(cache(), 3)
    session.update([*named("a", 0, 1), *named("b", 0)])
    assert session.topics == {"a": 2, "b": 1}
    assert session.forget([("a", 0), ("c", 9)]) == [("a", 0)]
    assert session.forget([("b", 0)]) == [("b", 0)]
    assert session.topics == {"a": 1}


async def test_one_waiter_per_session_woken_by_its_partitions_until_closed() -> None:
    waiters: FetchWaiters[TopicPartition] = FetchWaiters()
    sessions = ConsumerFetchSessions(waiters)
    session = opened(sessions, 2)
    session.update(named("t", 0, 1))
    waiter = sessions.waiter(session)
    assert sessions.waiter(session) is waiter  # same partitions: not registered again
    waiter.arm()
    assert waiters.notify(TopicPartition("t", 1)) == 1
    assert waiter.wakeups == 1
    session.forget([("t", 1)])
    again = sessions.waiter(session)
    assert waiters.waiting(TopicPartition("t", 1)) == 0
    assert waiters.waiting(TopicPartition("t", 0)) == 1
    again.arm()
    sessions.close(session.session_id)
    assert again.wakeups == 1  # a parked round answers at once
    assert waiters.waiting(TopicPartition("t", 0)) == 0


def test_metrics_count_fetches_by_kind_once_per_registry() -> None:
    registry = CollectorRegistry()
    first, second = cache(), cache()
    register_metrics(registry, first)
    register_metrics(registry, second)  # a new listener on the same broker replaces the first
    opened(second, 1)
    assert registry.get_sample_value("yak_broker_kafka_fetch_sessions") == 1
    assert registry.get_sample_value("yak_broker_kafka_fetches_total", {"kind": "full"}) == 1
    assert registry.get_sample_value("yak_broker_kafka_fetch_session_evictions_total") == 0
