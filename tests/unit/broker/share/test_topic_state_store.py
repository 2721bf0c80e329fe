"""``TopicShareStateStore`` on an in-memory state topic (``fake_state_topic``): partitioning,
one batch per partition, last value wins, tombstones, incremental catch-up, failed and
redirected produces, and a new leader whose high watermark lags."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.broker.share.fake_state_topic import FakeStateTopic
from yak.errors import (
    KafkaTimeoutError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from yak.partitioner import partition_for_key
from yak_broker.share.state_store import SharePartitionKey
from yak_broker.share.topic_state_store import TopicShareStateStore

PARTITIONS = 16


def store_on(
    topic: FakeStateTopic,
    *,
    timeout_ms: int = 30_000,
    max_retries: int = 3,
    max_batch_bytes: int = 512 * 1024,
) -> TopicShareStateStore:
    return TopicShareStateStore(
        topic.snapshot,
        topic.wait_for,
        topic,
        now_ms=lambda: 1_000,
        timeout_ms=timeout_ms,
        max_retries=max_retries,
        max_batch_bytes=max_batch_bytes,
    )


def key(n: int, group: str = "jobs") -> SharePartitionKey:
    return SharePartitionKey(group, "orders", n)


def of(k: SharePartitionKey) -> int:
    return partition_for_key(k.encode(), PARTITIONS)


def keys_in(partition: int, count: int) -> list[SharePartitionKey]:
    found = (key(n) for n in range(10_000))
    return [k for k in found if of(k) == partition][:count]


@pytest.fixture
def topic() -> FakeStateTopic:
    return FakeStateTopic(PARTITIONS)


async def test_a_save_writes_one_batch_per_state_partition_on_its_murmur2_partition(
    topic: FakeStateTopic,
) -> None:
    store = store_on(topic)
    snapshots = {key(n): f"snapshot {n}".encode() for n in range(40)}
    await store.save(snapshots)
    expected = {of(k) for k in snapshots}
    assert len(expected) > 1
    assert sorted(p for _, p, _ in topic.produces) == sorted(expected)  # one produce each
    for k, value in snapshots.items():
        assert (k.encode(), value) in topic.values(of(k))
    assert all(broker == topic.leaders[p][0] for broker, p, _ in topic.produces)


def test_a_keys_lane_is_its_state_partition(topic: FakeStateTopic) -> None:
    store = store_on(topic)
    lanes = {store.lane(k) for k in (key(n) for n in range(40))}
    assert len(lanes) > 1
    assert all(store.lane(k) == of(k) for k in (key(n) for n in range(40)))
    topic.topic_exists = False
    topic.publish()
    assert store.lane(key(1)) == 0  # no topic: its saves fail anyway


async def test_another_store_loads_the_last_value_and_a_tombstone_means_none(
    topic: FakeStateTopic,
) -> None:
    writer, a, b = key(1), key(2), key(3)
    store = store_on(topic)
    await store.save({writer: b"one", a: b"a1"})
    await store.save({writer: b"two"})
    await store.save({b: b"b1"})
    await store.delete(a)
    reader = store_on(topic)
    assert await reader.load(writer) == b"two"
    assert await reader.load(a) is None
    assert await reader.load(b) == b"b1"
    assert await reader.load(key(4)) is None
    assert await store.load(writer) == b"two"  # the writer's own view agrees


async def test_keys_reads_every_state_partition_and_lists_the_groups_live_keys(
    topic: FakeStateTopic,
) -> None:
    mine = [SharePartitionKey("jobs", "orders", n, incarnation=n % 2) for n in range(30)]
    others = [key(n, group="other") for n in range(5)]
    writer = store_on(topic)
    await writer.save(dict.fromkeys(mine + others, b"s"))
    await writer.delete(mine[0], mine[1])
    assert len({of(k) for k in mine}) > 1
    reader = store_on(topic)
    assert sorted(await reader.keys("jobs")) == sorted(mine[2:])
    assert {p for p, _ in topic.fetches} == set(range(PARTITIONS))  # every partition read
    assert await reader.keys("nobody") == []


async def test_a_delete_of_several_keys_is_one_write_per_state_partition(
    topic: FakeStateTopic,
) -> None:
    doomed = keys_in(4, 3)
    store = store_on(topic)
    await store.save(dict.fromkeys(doomed, b"v"))
    topic.produces.clear()
    await store.delete(*doomed)
    assert [(p, n) for _, p, n in topic.produces] == [(4, 3)]
    assert [await store_on(topic).load(k) for k in doomed] == [None, None, None]


async def test_a_later_load_reads_only_what_was_written_since(topic: FakeStateTopic) -> None:
    first, second = keys_in(5, 2)
    writer, reader = store_on(topic), store_on(topic)
    await writer.save({first: b"v1"})
    await writer.save({second: b"w1"})
    assert await reader.load(first) == b"v1"
    assert topic.fetches[0] == (5, 0)
    end = topic.logs[5].end
    await writer.save({first: b"v2"})  # another broker writes meanwhile
    topic.fetches.clear()
    assert await reader.load(first) == b"v2"
    assert topic.fetches[0] == (5, end)  # from where the last read stopped
    assert await reader.load(second) == b"w1"
    assert len(reader.view(5)) == 2  # one snapshot per key in memory


async def test_concurrent_loads_of_one_partition_share_a_catch_up(topic: FakeStateTopic) -> None:
    wanted = keys_in(7, 10)
    await store_on(topic).save({k: bytes([i]) for i, k in enumerate(wanted)})
    reader = store_on(topic)
    values = await asyncio.gather(*(reader.load(k) for k in wanted))
    assert values == [bytes([i]) for i in range(10)]
    reads_from_start = [f for f in topic.fetches if f == (7, 0)]
    assert len(reads_from_start) == 1
    assert len(topic.fetches) == 2  # the first load's round, then one shared by the nine others


async def test_a_failed_produce_raises_and_leaves_the_view_as_it_was(topic: FakeStateTopic) -> None:
    k = key(1)
    store = store_on(topic)
    await store.save({k: b"v1"})
    topic.fail_next[of(k)] = NotEnoughReplicasError("ISR below min.insync.replicas")
    with pytest.raises(NotEnoughReplicasError):
        await store.save({k: b"v2"})
    assert store.view(of(k)).get(k) == b"v1"


async def test_a_save_over_two_partitions_with_one_failing_updates_no_view(
    topic: FakeStateTopic,
) -> None:
    (a,), (b,) = keys_in(1, 1), keys_in(2, 1)
    store = store_on(topic)
    topic.fail_next[2] = NotEnoughReplicasError("ISR below min.insync.replicas")
    with pytest.raises(NotEnoughReplicasError):
        await store.save({a: b"a", b: b"b"})
    assert (a.encode(), b"a") in topic.values(1)  # written, but not assumed durable
    assert store.view(1).get(a) is None
    assert store.view(2).get(b) is None


async def test_a_refused_produce_waits_for_the_metadata_to_move_then_retries(
    topic: FakeStateTopic,
) -> None:
    (k,) = keys_in(3, 1)
    store = store_on(topic)
    old = topic.leaders[3][0]
    new = next(b for b in topic.brokers if b != old)
    topic.move_leader(3, new, publish=False)  # the metadata still names the old leader
    saving = asyncio.create_task(store.save({k: b"v"}))
    await topic.refused.wait()
    assert not saving.done()
    topic.publish()
    await saving
    assert topic.produces == [(new, 3, 1)]
    assert await store_on(topic).load(k) == b"v"


async def test_retries_are_bounded_when_the_metadata_never_moves(topic: FakeStateTopic) -> None:
    (k,) = keys_in(3, 1)
    topic.move_leader(3, (topic.leaders[3][0] + 1) % 3, publish=False)
    store = store_on(topic, timeout_ms=20, max_retries=2)
    with pytest.raises(NotLeaderOrFollowerError):
        await store.save({k: b"v"})
    assert topic.values(3) == []


async def test_without_the_topic_every_call_raises_unknown_topic(topic: FakeStateTopic) -> None:
    topic.topic_exists = False
    topic.publish()
    store = store_on(topic)
    with pytest.raises(UnknownTopicOrPartitionError, match="__yak_share_state"):
        await store.load(key(1))
    with pytest.raises(UnknownTopicOrPartitionError):
        await store.save({key(1): b"v"})


async def test_a_new_leader_is_read_past_its_epoch_start_before_answering(
    topic: FakeStateTopic,
) -> None:
    """The previous leader acknowledged v2; the new leader has it but its high watermark still
    stands below it: a load waits for the high watermark instead of answering v1."""
    (k,) = keys_in(4, 1)
    writer = store_on(topic)
    await writer.save({k: b"v1"})
    await writer.save({k: b"v2"})
    topic.move_leader(4, (topic.leaders[4][0] + 1) % 3)
    topic.hold_high_watermark(4, 1)  # v1 below it, v2 above
    loading = asyncio.create_task(store_on(topic).load(k))
    await topic.long_polling.wait()
    assert not loading.done()
    topic.release(4)
    assert await loading == b"v2"


async def test_a_load_that_cannot_reach_the_epoch_start_times_out(topic: FakeStateTopic) -> None:
    (k,) = keys_in(4, 1)
    await store_on(topic).save({k: b"v1"})
    topic.move_leader(4, (topic.leaders[4][0] + 1) % 3)
    topic.hold_high_watermark(4, 0)
    with pytest.raises(KafkaTimeoutError):
        await store_on(topic, timeout_ms=50).load(k)


async def test_a_read_below_the_log_start_starts_at_the_log_start(topic: FakeStateTopic) -> None:
    first, second = keys_in(6, 2)
    await store_on(topic).save({first: b"gone"})
    await store_on(topic).save({second: b"kept"})
    topic.logs[6].records.pop(0)
    topic.logs[6].log_start = 1
    reader = store_on(topic)
    assert await reader.load(second) == b"kept"
    assert await reader.load(first) is None
    assert (6, 1) in topic.fetches


async def test_a_large_save_is_split_into_batches_under_the_limit(topic: FakeStateTopic) -> None:
    wanted = keys_in(8, 5)
    store = store_on(topic, max_batch_bytes=300)
    await store.save({k: bytes(100) for k in wanted})
    assert [n for _, p, n in topic.produces] == [2, 2, 1]
    reader = store_on(topic)
    assert [await reader.load(k) for k in wanted] == [bytes(100)] * 5


async def test_stop_closes_the_clients(topic: FakeStateTopic) -> None:
    store = store_on(topic)
    await store.start()
    await store.stop()
    assert topic.closed
