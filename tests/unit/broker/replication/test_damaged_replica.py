"""Bit rot in a sealed segment of a partition's leader (``storage.damaged_batch``,
``ReplicaManager.report_damage``): the damaged batch is never served — the read gets a
retriable ``KAFKA_STORAGE_ERROR`` — the leader gives the partition up through an ISR proposal
that marks its own log as lost for the controller, and once another broker leads it truncates
to before the damaged batch as it starts following, to fetch the rest again."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.errors import KafkaStorageError
from yak.metadata.models import PartitionState
from yak.protocol.broker_wire import FetchPartition, FetchRequest
from yak.record import RecordInput, encode_batch, iter_records
from yak.types import TopicPartition
from yak_broker.replication.replica_roles import DAMAGED_LOG_DIR

TP = TopicPartition("rot", 0)
PEER = 1


def batch(value: bytes) -> bytes:
    return encode_batch([RecordInput(key=None, value=value, timestamp=1)])


async def _state(broker: BrokerHarness) -> PartitionState:
    kv = await broker.store.get(broker.keyspace.partition(TP.topic, TP.partition))
    assert kv is not None
    return PartitionState.decode(kv.value)


async def test_a_damaged_leader_gives_up_and_truncates_before_the_damage_to_follow(
    broker: BrokerHarness,
) -> None:
    await broker.register_peer(PEER, log_dir_id="peer-dir")
    # Tiny segments: each batch rolls a new one, so the first batches are in sealed segments.
    await broker.create_topic(
        TP.topic, replicas=(0, PEER), isr=(0,), configs={"segment.bytes": "100"}
    )
    for i in range(4):
        await broker.client.produce_one(TP.topic, 0, batch(b"v%d" % i))
    await broker.set_partition(TP.topic, 0, replicas=(0, PEER), isr=(0, PEER))
    log = broker.broker.replicas.replicas[TP].log
    second = log.directory / f"{1:020d}.log"  # the sealed segment of offset 1
    data = bytearray(second.read_bytes())
    data[-1] ^= 0x01  # a flipped bit in the record bytes, under the CRC
    second.write_bytes(bytes(data))

    def fetch(offset: int) -> FetchRequest:
        return FetchRequest((FetchPartition(TP.topic, 0, offset, 1 << 20),), max_wait_ms=0)

    [intact] = await broker.client.fetch(fetch(0))  # the batch before is still served
    assert [r.value for r in iter_records(intact.records)] == [b"v0"]
    [refused] = await broker.client.fetch(fetch(1))
    assert refused.error is not None
    error = refused.error.exception()
    assert isinstance(error, KafkaStorageError)
    assert error.retriable
    assert not refused.records

    async with asyncio.timeout(5):  # the proposal is written in the background
        await asyncio.gather(*broker.broker.replicas._proposals)
    state = await _state(broker)
    assert state.isr_log_dirs[0].startswith(DAMAGED_LOG_DIR)
    assert (state.leader, state.isr) == (0, (0, PEER))  # the controller decides the rest
    with pytest.raises(Exception, match="lost its log"):
        broker.broker.replicas.leader(TP)

    # The controller elects the peer (and drops this broker, whose log it counts as lost).
    await broker.set_partition(
        TP.topic, 0, leader=PEER, replicas=(0, PEER), isr=(PEER,), leader_epoch=1
    )
    assert log.log_end_offset == 1  # offset 1's batch and everything after: fetched again
