"""Incremental fetch sessions (KIP-227) as the leader serves them on its internal listener:
a follower (replica 1) talks to an in-process broker 0 that leads every partition."""

from __future__ import annotations

import asyncio
import time

from tests.unit.broker.broker_harness import BrokerHarness, session_round
from yak.clients.broker_connection import BrokerConnection
from yak.protocol.broker_wire import (
    ACKS_ALL,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
)
from yak.record import RecordInput, encode_batch
from yak.types import TopicPartition
from yak_broker.replication.state.fetch_metadata import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
)

FOLLOWER = 1


def batch(*values: bytes) -> bytes:
    return encode_batch([RecordInput(key=None, value=v, timestamp=1) for v in values])


async def led(broker: BrokerHarness, topic: str, partitions: int) -> None:
    await broker.create_topic(topic, partitions, replicas=(0, FOLLOWER), isr=(0, FOLLOWER))


def request(
    positions: dict[int, int],
    session_id: int,
    epoch: int,
    *,
    forgotten: tuple[tuple[str, int], ...] = (),
    max_wait_ms: int = 100,
    replica_id: int = FOLLOWER,
) -> FetchRequest:
    return session_round(
        "s",
        positions,
        session_id,
        epoch,
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        forgotten=forgotten,
    )


async def fetch(connection: BrokerConnection, fetch_request: FetchRequest) -> FetchResponse:
    return await connection.fetch_session(fetch_request, 10)


def answered(response: FetchResponse) -> dict[int, tuple[int, int]]:
    """Partition → (high watermark, record bytes) of each answered partition."""
    return {
        p.partition: (p.high_watermark, len(memoryview(p.records))) for p in response.partitions
    }


async def produce(connection: BrokerConnection, partition: int, acks: int = 1) -> None:
    records = ProduceRequest((ProducePartition("s", partition, batch(b"x")),), acks=acks)
    await connection.produce(records, 10)


async def test_a_full_fetch_creates_a_session_and_idle_rounds_answer_nothing(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await led(broker, "s", 3)
    full = await fetch(connection, request({0: 0, 1: 0, 2: 0}, 0, 0))
    assert full.error_code == 0
    assert full.session_id > 0
    assert sorted(answered(full)) == [0, 1, 2]  # a full answer names every partition
    sessions = broker.broker.replicas.fetch_sessions
    session = sessions.get(full.session_id)
    assert session is not None
    assert not session.dirty
    for epoch in (1, 2):
        started = time.perf_counter()
        idle = await fetch(connection, request({}, full.session_id, epoch))
        assert time.perf_counter() - started >= 0.09  # parked for max_wait_ms
        assert idle.error_code == 0
        assert idle.session_id == full.session_id
        assert idle.partitions == ()
    assert session.epoch == 3
    assert not session.dirty


async def test_an_append_wakes_the_session_and_only_that_partition_is_answered(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await led(broker, "s", 3)
    full = await fetch(connection, request({0: 0, 1: 0, 2: 0}, 0, 0))
    parked = asyncio.create_task(
        fetch(connection, request({}, full.session_id, 1, max_wait_ms=30_000))
    )
    await asyncio.sleep(0.05)
    assert not parked.done()
    await produce(connection, 1)
    woken = await asyncio.wait_for(parked, 5)
    assert set(answered(woken)) == {1}
    assert answered(woken)[1][1] > 0


async def test_acks_all_completes_when_the_next_incremental_fetch_names_the_new_position(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await led(broker, "s", 2)
    full = await fetch(connection, request({0: 0, 1: 0}, 0, 0))
    sid = full.session_id
    parked = asyncio.create_task(fetch(connection, request({}, sid, 1, max_wait_ms=30_000)))
    await asyncio.sleep(0.05)
    acked = asyncio.create_task(produce(connection, 0, acks=ACKS_ALL))
    data = await asyncio.wait_for(parked, 5)
    assert set(answered(data)) == {0}
    assert not acked.done()
    # The follower appended: its next round names partition 0 at offset 1; the high
    # watermark moves on arrival and the produce is answered at once.
    moved = asyncio.create_task(fetch(connection, request({0: 1}, sid, 2, max_wait_ms=30_000)))
    await asyncio.wait_for(acked, 5)
    replica = broker.broker.replicas.replicas[TopicPartition("s", 0)]
    assert replica.log.high_watermark == 1
    moved.cancel()


async def test_an_unknown_session_and_a_wrong_epoch_are_refused_whole(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await led(broker, "s", 1)
    unknown = await fetch(connection, request({0: 0}, 4242, 1))
    assert (unknown.error_code, unknown.session_id, unknown.partitions) == (
        FETCH_SESSION_ID_NOT_FOUND,
        0,
        (),
    )
    full = await fetch(connection, request({0: 0}, 0, 0))
    stale = await fetch(connection, request({}, full.session_id, 5))
    assert stale.error_code == INVALID_FETCH_SESSION_EPOCH
    assert stale.partitions == ()
    # The session survives a refused request: the expected epoch still works.
    assert (await fetch(connection, request({}, full.session_id, 1))).error_code == 0


async def test_a_restarted_leader_knows_no_session(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await led(broker, "s", 1)
    full = await fetch(connection, request({0: 0}, 0, 0))
    broker.broker.replicas.fetch_sessions.close_all()  # what a restart forgets
    again = await fetch(connection, request({}, full.session_id, 1))
    assert again.error_code == FETCH_SESSION_ID_NOT_FOUND


async def test_partitions_added_and_forgotten_mid_session(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await led(broker, "s", 3)
    full = await fetch(connection, request({0: 0}, 0, 0))
    sid = full.session_id
    added = await fetch(connection, request({2: 0}, sid, 1))
    assert set(answered(added)) == {2}  # new to the session: told its offsets once
    forgot = await fetch(connection, request({}, sid, 2, forgotten=(("s", 0),)))
    assert forgot.partitions == ()
    session = broker.broker.replicas.fetch_sessions.get(sid)
    assert session is not None
    assert sorted(session.partitions) == [("s", 2)]
    await produce(connection, 0)  # forgotten: no longer this session's
    assert (await fetch(connection, request({}, sid, 3))).partitions == ()
    await produce(connection, 2)
    assert set(answered(await fetch(connection, request({}, sid, 4)))) == {2}


async def test_consumers_stay_sessionless(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.create_topic("s")
    await produce(connection, 0)
    asked = await fetch(connection, request({0: 0}, 0, 0, replica_id=-1))
    assert asked.session_id == 0
    assert answered(asked) == {0: (1, answered(asked)[0][1])}
    assert len(broker.broker.replicas.fetch_sessions) == 0
    (plain,) = await connection.fetch(FetchRequest((FetchPartition("s", 0, 0),)), 10)
    assert plain.high_watermark == 1
