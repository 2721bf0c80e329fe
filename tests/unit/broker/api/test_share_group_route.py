"""``GET /v1/share-groups/{group}`` on a running in-process broker, through
``BrokerClient.share_group_state``: the led partitions of the asked topics before anything was read
(not loaded), a share-partition after an acquire and an accept (loaded, counted), and an
unknown group (404 ``GROUP_ID_NOT_FOUND``)."""

from __future__ import annotations

import pytest

from tests.unit.broker.broker_harness import BrokerHarness
from yak.clients.broker import BrokerClient
from yak.clock import SystemClock
from yak.errors import GroupIdNotFoundError
from yak.metadata.models import ShareGroupRecord, ShareOffsetReset
from yak.protocol import kafka_share as ks
from yak.record import RecordInput, encode_batch
from yak_broker.share.share_manager import ShareManager
from yak_broker.share.share_metrics import ShareMetrics
from yak_broker.share.state_store import MemoryShareStateStore
from yak_broker.share.topic_ids import topic_uuid


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


async def test_the_route_reports_led_share_partitions(
    broker: BrokerHarness, client: BrokerClient
) -> None:
    topic_id = topic_uuid(await broker.create_topic("jobs", partitions=2))
    assert topic_id is not None
    record = ShareGroupRecord(name="g", created_at_ms=0, offset_reset=ShareOffsetReset.EARLIEST)
    await broker.store.put(broker.keyspace.share_group("g"), record.encode())
    await broker.broker.wait_for_metadata(lambda s: "g" in s.share_groups, 5)
    batch = encode_batch([RecordInput(None, b"one"), RecordInput(None, b"two")])
    await broker.client.produce_one("jobs", 0, batch, acks=-1)
    async with client:
        before = await client.share_group_state("g", ["jobs"])
        assert [(p.partition, p.loaded, p.high_watermark) for p in before.partitions] == [
            (0, False, 2),
            (1, False, 0),
        ]
        assert (await client.share_group_state("g")).partitions == []
        request = ks.ShareFetchRequest("g", "m1", (ks.SharePartitionAcks(topic_id, 0),))
        await client.share_fetch(request)
        ack = ks.AckBatch(0, 0, (int(ks.AckType.ACCEPT),))
        await client.share_acknowledge(
            ks.ShareAcknowledgeRequest("g", "m1", (ks.SharePartitionAcks(topic_id, 0, (ack,)),))
        )
        after = await client.share_group_state("g")
        assert after.broker_id == broker.broker.settings.broker_id
        (part,) = after.partitions
        assert (part.loaded, part.start_offset, part.acquired, part.lag) == (True, 1, 1, 1)
        assert part.acquired_by_member == {"m1": 1}
        (counters,) = after.topics
        assert (counters.topic, counters.acquired, counters.accepted) == ("jobs", 2, 1)
        with pytest.raises(GroupIdNotFoundError):
            await client.share_group_state("nobody")
