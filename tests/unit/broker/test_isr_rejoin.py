"""A follower that the controller takes out of the ISR rejoins through its fetch session even on
an idle partition (issue 19): found restarting a broker of 3,000 partitions, where the
controller dropped the restarted broker from the ISR of partitions whose session had already
reported it caught up; their sessions never read them again and 275 stayed under-replicated."""

from __future__ import annotations

import asyncio

from tests.unit.broker.broker_harness import BrokerHarness, session_round
from yak.clients.broker_connection import BrokerConnection
from yak.metadata.models import PartitionState
from yak.protocol.broker_wire import FetchRequest

FOLLOWER = 1


def _round(positions: dict[int, int], session_id: int, epoch: int) -> FetchRequest:
    return session_round("r", positions, session_id, epoch, replica_id=FOLLOWER, max_wait_ms=50)


async def _isr(broker: BrokerHarness, partition: int) -> tuple[int, ...]:
    kv = await broker.store.get(broker.keyspace.partition("r", partition))
    assert kv is not None
    return PartitionState.decode(kv.value).isr


async def test_a_follower_dropped_by_the_controller_rejoins_on_idle_rounds(
    broker: BrokerHarness, connection: BrokerConnection
) -> None:
    await broker.register_peer(FOLLOWER)
    await broker.create_topic("r", 2, replicas=(0, FOLLOWER), isr=(0, FOLLOWER))
    full = await connection.fetch_session(_round({0: 0, 1: 0}, 0, 0), 10)
    session = broker.broker.replicas.fetch_sessions.get(full.session_id)
    assert session is not None
    assert not session.dirty  # both caught up and in the ISR: nothing to read
    # The controller drops the follower (say its registration lapsed) from partition 0's ISR.
    await broker.set_partition("r", 0, replicas=(0, FOLLOWER), isr=(0,))
    assert await _isr(broker, 0) == (0,)
    epoch = 1
    async with asyncio.timeout(5):
        while await _isr(broker, 0) != (0, FOLLOWER):
            await connection.fetch_session(_round({}, full.session_id, epoch), 10)  # idle
            epoch += 1
    assert epoch <= 3  # back at the first idle round or the next one
    assert await _isr(broker, 1) == (0, FOLLOWER)
