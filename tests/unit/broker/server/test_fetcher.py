"""A consumer's fetch of a partition the metadata says this broker leads, before the broker has
installed that leadership (a topic just created): the long poll waits for it — woken when the
replica is installed, not by a timer — and answers empty at its deadline, never
``NOT_LEADER_OR_FOLLOWER``; a follower is still told at once. The same while a new leader
epoch is being stamped, with the log's offsets. Over HTTP and over the internal listener
(Kafka framing). ListOffsets (the rest-proxy's, over HTTP) waits for the leadership too, up
to a bound."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import NotLeaderOrFollowerError
from yak.metadata.models import PartitionState, TopicRecord
from yak.protocol.broker_wire import FetchPartition, FetchRequest
from yak.record import RecordInput, encode_batch, iter_records
from yak.types import TopicPartition
from yak_broker.server import offsets
from yak_broker.storage.log import Log
from yak_broker.storage.log_manager import LogRequest

TP = TopicPartition("fresh", 0)


@dataclass
class HeldCreation:
    """The broker's log creation, held until ``release``; ``revision``: the topic's keys'."""

    release: asyncio.Event
    revision: int


@pytest.fixture
def broker(broker_on_each_transport: BrokerHarness) -> BrokerHarness:
    return broker_on_each_transport


@pytest.fixture
async def held(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[HeldCreation]:
    """Topic ``fresh`` written as the coordinator writes it (led here, epoch 0), its log's
    creation held: the broker knows it leads the partition but has no replica for it yet."""
    logs = broker.broker.replicas._logs
    create, release = logs.create_logs, asyncio.Event()

    async def held_create(requests: Sequence[LogRequest]) -> dict[TopicPartition, object]:
        await release.wait()
        return dict(await create(requests))

    monkeypatch.setattr(logs, "create_logs", held_create)
    record = TopicRecord(
        name=TP.topic, topic_id="f1", partitions=1, replication_factor=1, created_at_ms=0
    )
    await broker.store.put(broker.keyspace.topic(TP.topic), record.encode())
    state = PartitionState(
        topic=TP.topic, partition=0, leader=0, leader_epoch=0, replicas=(0,), isr=(0,)
    )
    revision = await broker.store.put(broker.keyspace.partition(TP.topic, 0), state.encode())
    cache = broker.broker._cache
    assert cache is not None
    await cache.wait_for_revision(revision, timeout_s=5)
    with pytest.raises(NotLeaderOrFollowerError, match="not ready"):
        broker.broker.replicas.leader(TP)
    yield HeldCreation(release, revision)
    release.set()


async def until_waiting(broker: BrokerHarness) -> None:
    for _ in range(100):  # let the fetch reach its wait (a few event-loop turns)
        if broker.broker.waiters.waiting(TP):
            return
        await asyncio.sleep(0)
    raise AssertionError("the fetch never waited")


async def test_a_long_poll_waits_for_the_leader_to_be_ready(
    broker: BrokerHarness, held: HeldCreation
) -> None:
    fetch = asyncio.create_task(broker.client.fetch_one(TP.topic, 0, 0, max_wait_ms=30_000))
    await until_waiting(broker)
    held.release.set()
    await broker.sync(held.revision)  # the metadata pass under way has hosted the replica
    batch = encode_batch([RecordInput(value=b"first")])
    assert (await broker.client.produce_one(TP.topic, 0, batch)).base_offset == 0
    fetched = await asyncio.wait_for(fetch, 5)
    assert [r.value for r in iter_records(fetched.records)] == [b"first"]


async def test_a_long_poll_answers_empty_at_its_deadline_if_never_ready(
    broker: BrokerHarness, held: HeldCreation
) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    fetched = await broker.client.fetch_one(TP.topic, 0, 0, max_wait_ms=100)
    assert loop.time() - started >= 0.09
    assert (len(fetched.records), fetched.error) == (0, None)
    assert (fetched.high_watermark, fetched.log_start_offset) == (0, 0)  # the log to be made


async def test_installing_the_leadership_wakes_the_waiting_fetches(
    broker: BrokerHarness, held: HeldCreation
) -> None:
    with broker.broker.waiters.watching([TP]) as waiter:
        waiter.arm()
        held.release.set()
        assert await waiter.wait(5)  # woken by the metadata pass, not by its timeout
        broker.broker.replicas.leader_partition(TP)  # ready now


async def test_list_offsets_waits_for_the_leadership_to_be_installed(
    broker: BrokerHarness, held: HeldCreation
) -> None:
    """A consumer resolving its start position (the rest-proxy's ListOffsets over HTTP) right
    after the topic was created gets the offsets, not the leader's start-up."""
    listing = asyncio.create_task(broker.client.list_offsets([(TP.topic, 0)], "latest"))
    await until_waiting(broker)
    assert not listing.done()
    held.release.set()
    (answer,) = await asyncio.wait_for(listing, 5)
    assert (answer.error, answer.offset) == (None, 0)


async def test_list_offsets_answers_not_ready_after_its_bound(
    broker: BrokerHarness, held: HeldCreation
) -> None:
    answers = await offsets.list_offsets_when_ready(broker.broker.replicas, [TP], -1, wait_s=0.05)
    assert answers[0].error is not None
    assert answers[0].error.code == "NOT_LEADER_OR_FOLLOWER"


async def test_a_follower_is_told_at_once(broker: BrokerHarness, held: HeldCreation) -> None:
    request = FetchRequest(
        (FetchPartition(TP.topic, 0, 0, 1 << 20),), max_wait_ms=30_000, replica_id=1
    )
    (fetched,) = await asyncio.wait_for(broker.client.fetch(request), 5)
    assert fetched.error is not None
    assert isinstance(fetched.error.exception(), NotLeaderOrFollowerError)


async def test_a_new_epoch_being_stamped_answers_the_log_s_offsets_meanwhile(
    broker: BrokerHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This broker leads again in a new epoch, whose stamp is being written (the leader
    retired meanwhile): a consumer's poll answers empty with the log's offsets, then the
    first record appended in the new epoch."""
    await broker.create_topic("again")
    batch = encode_batch([RecordInput(value=b"old")] * 3)
    assert (await broker.client.produce_one("again", 0, batch)).base_offset == 0
    logs = broker.broker.replicas._logs
    persist, release = logs.persist_epochs, asyncio.Event()

    async def held_persist(jobs: Sequence[tuple[TopicPartition, Log]]) -> object:
        await release.wait()
        return await persist(jobs)

    monkeypatch.setattr(logs, "persist_epochs", held_persist)
    state = PartitionState(
        topic="again", partition=0, leader=0, leader_epoch=1, replicas=(0,), isr=(0,)
    )
    revision = await broker.store.put(broker.keyspace.partition("again", 0), state.encode())
    tp = TopicPartition("again", 0)
    for _ in range(1000):  # the metadata pass reaches the held write (event-loop turns)
        if broker.broker.replicas.replicas[tp].leader is None:
            break
        await asyncio.sleep(0)
    assert broker.broker.replicas.replicas[tp].leader is None, "the new epoch never started"
    fetched = await broker.client.fetch_one("again", 0, 3, max_wait_ms=50)
    assert (len(fetched.records), fetched.high_watermark, fetched.log_start_offset) == (0, 3, 0)
    waiting = asyncio.create_task(broker.client.fetch_one("again", 0, 3, max_wait_ms=30_000))
    release.set()
    await broker.sync(revision)
    batch = encode_batch([RecordInput(value=b"new")])
    assert (await broker.client.produce_one("again", 0, batch)).base_offset == 3
    fetched = await asyncio.wait_for(waiting, 5)
    assert [r.value for r in iter_records(fetched.records)] == [b"new"]
