"""A caught-up follower outside the ISR rejoins in an incremental fetch session.

The leader proposes adding a follower back only on a read of its position with no other ISR
change in flight (``LeaderPartition``); in a session an idle follower's partition is read only
while due. Found by the simulation: a follower reporting its caught-up position while an ISR
change was in flight was never read again on a quiet partition, and stayed out of the ISR (so
acks=all could fail with NOT_ENOUGH_REPLICAS for good). Now a partition whose follower is
outside the ISR, or may be leaving it, stays due (``LeaderFetchSession.commit``'s ``in_sync``).
"""

from __future__ import annotations

import asyncio

from tests.unit.broker.broker_harness import BrokerHarness, session_round
from yak.clients.broker_connection import BrokerConnection
from yak.protocol.broker_wire import FetchedPartition, FetchRequest
from yak.types import TopicPartition
from yak_broker.replication.fetch_session_cache import FetchSessionCache
from yak_broker.replication.state.messages import AlterIsr

FOLLOWER = 1
KEY = ("s", 0)


def test_commit_keeps_due_a_partition_whose_follower_is_not_in_sync() -> None:
    cache = FetchSessionCache()
    session = cache.open(0, 0, FOLLOWER, [("s", 0, 5, 1 << 20, 0), ("s", 1, 5, 1 << 20, 0)], (), 0)
    assert session is not None
    read = [FetchedPartition("s", p, 5, 5, 0) for p in (0, 1)]
    session.commit(read, lambda _: 5, lambda key: key != KEY)
    assert list(session.dirty) == [KEY]  # read again next round, the other one is clean
    session.commit(read, lambda _: 5)  # without ``in_sync``: every one read to its end is clean
    assert not session.dirty


def request(positions: dict[int, int], session_id: int, epoch: int) -> FetchRequest:
    return session_round("s", positions, session_id, epoch, replica_id=FOLLOWER, max_wait_ms=50)


async def test_a_follower_caught_up_during_an_isr_change_rejoins_when_idle(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.register_peer(FOLLOWER)
    await broker.create_topic("s", 1, replicas=(0, FOLLOWER), isr=(0,))
    replica = broker.broker.replicas.replicas[TopicPartition(*KEY)]
    machine = replica.leader
    assert machine is not None
    # Another ISR change is in flight when the follower's full fetch reports it caught up.
    machine.pending = AlterIsr("s", 0, 0, machine.leader_epoch, machine.state.partition_epoch, (0,))
    full = await connection.fetch_session(request({0: 0}, 0, 0), 10)
    assert machine.isr == (0,)  # no expansion while a change is in flight
    session = broker.broker.replicas.fetch_sessions.get(full.session_id)
    assert session is not None
    assert KEY in session.dirty  # outside the ISR: its position is read again next round
    machine.on_proposal_failed()  # the change ended
    epoch = 1
    for _ in range(100):  # idle rounds: nothing named, nothing appended
        idle = await connection.fetch_session(request({}, full.session_id, epoch), 10)
        assert idle.error_code == 0
        epoch += 1
        if FOLLOWER in replica.state.isr:
            break
        await asyncio.sleep(0.01)
    assert replica.state.isr == (0, FOLLOWER)
    await connection.fetch_session(request({}, full.session_id, epoch), 10)
    assert not session.dirty  # settled in the ISR: idle rounds read nothing again
