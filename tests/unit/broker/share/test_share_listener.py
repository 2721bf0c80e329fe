"""ShareFetch and ShareAcknowledge on a running in-process broker's internal listener, through
``BrokerClient``: produce, acquire, acknowledge, a bad filter refused for the request."""

from __future__ import annotations

import uuid

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.clients.broker import BrokerClient
from yak.clock import SystemClock
from yak.errors import InvalidFilterError
from yak.metadata.models import ShareGroupRecord, ShareOffsetReset
from yak.protocol import kafka_share as ks
from yak.record import RecordInput, decode_batches, encode_batch
from yak_broker.share.share_manager import ShareManager
from yak_broker.share.share_metrics import ShareMetrics
from yak_broker.share.state_store import MemoryShareStateStore
from yak_broker.share.topic_ids import topic_uuid


async def _share_group(broker: BrokerHarness) -> None:
    record = ShareGroupRecord(name="g", created_at_ms=0, offset_reset=ShareOffsetReset.EARLIEST)
    await broker.store.put(broker.keyspace.share_group("g"), record.encode())
    await broker.broker.wait_for_metadata(lambda s: "g" in s.share_groups, 5)


@pytest.fixture
async def client(broker: BrokerHarness) -> BrokerClient:
    b = broker.broker
    # the state topic is not part of this in-process cluster: snapshots stay in memory
    b.shares = ShareManager(
        b.snapshot,
        b._share_log,
        MemoryShareStateStore(),
        b.waiters,
        clock=SystemClock(),
        metrics=ShareMetrics(),
    )
    assert b.listener is not None
    return BrokerClient("http://127.0.0.1", transport=broker.transport, data_port=b.listener.port)


async def test_share_fetch_and_acknowledge_on_the_internal_listener(
    broker: BrokerHarness, client: BrokerClient
) -> None:
    topic_id = topic_uuid(await broker.create_topic("jobs"))
    assert topic_id is not None
    await _share_group(broker)
    batch = encode_batch([RecordInput(None, b"one"), RecordInput(None, b"two")])
    await broker.client.produce_one("jobs", 0, batch, acks=-1)
    async with client:
        request = ks.ShareFetchRequest("g", "m1", (ks.SharePartitionAcks(topic_id, 0),))
        response = await client.share_fetch(request)
        (answer,) = response.partitions
        assert answer.error is None
        assert answer.acquired == (ks.AcquiredRecords(0, 1, 1),)
        values = [r.value for b in decode_batches(bytes(answer.records)) for r in b.records]
        assert values == [b"one", b"two"]
        ack = ks.AckBatch(0, 1, (int(ks.AckType.ACCEPT),))
        (result,) = await client.share_acknowledge(
            ks.ShareAcknowledgeRequest("g", "m1", (ks.SharePartitionAcks(topic_id, 0, (ack,)),))
        )
        assert result.error is None
        (again,) = await client.share_acknowledge(
            ks.ShareAcknowledgeRequest("g", "m1", (ks.SharePartitionAcks(topic_id, 0, (ack,)),))
        )
        assert again.error is not None
        assert again.error.code == "INVALID_RECORD_STATE"
        unknown = ks.ShareFetchRequest("g", "m1", (ks.SharePartitionAcks(uuid.uuid4(), 0),))
        (missing,) = (await client.share_fetch(unknown)).partitions
        assert missing.error is not None
        assert missing.error.code == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(InvalidFilterError):
            await client.share_fetch(request._replace(filter="value.x =="))
