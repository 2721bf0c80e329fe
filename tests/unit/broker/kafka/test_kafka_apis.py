"""The Kafka listener's APIs on an in-process broker, spoken with kio (Kafka's own schemas):
Metadata, Produce (v7 through kio, v9 through the hand-written codec, legacy batches refused),
Fetch (v11 and v12; sessions: test_fetch_sessions), ListOffsets (exact record by timestamp, max
timestamp), InitProducerId, FindCoordinator and OffsetForLeaderEpoch; Produce v0-v2 refused per
partition."""

from __future__ import annotations

import asyncio
import datetime
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7 import request as list7
from kio.schema.metadata.v5 import request as metadata5
from kio.schema.metadata.v12 import request as metadata12
from kio.schema.offset_for_leader_epoch.v4 import request as epoch4
from kio.schema.produce.v9 import request as produce9

from tests.lagging_store import LaggingStore
from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import (
    KafkaTestConnection,
    kafka_port,
    request_frame,
)
from tests.unit.broker.kafka.test_kafka_listener import (
    batch,
    fetch_request,
    make,
    produce_request,
)
from yak.clock import SystemClock
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import PartitionState, TopicRecord
from yak.record import RecordInput, encode_batch, iter_records
from yak_broker.app import create_app
from yak_broker.settings import BrokerSettings

METADATA, PRODUCE, FETCH, LIST_OFFSETS = 3, 0, 1, 2


@pytest.fixture
async def kafka(broker: BrokerHarness) -> AsyncIterator[KafkaTestConnection]:
    connection = await KafkaTestConnection.open(kafka_port(broker.broker))
    yield connection
    await connection.close()


def metadata(names: list[str] | None, version: int = 12) -> Any:
    module = metadata12 if version == 12 else metadata5
    topics = None
    if names is not None:
        if version == 12:
            topics = tuple(make(module.MetadataRequestTopic, topic_id=None, name=n) for n in names)
        else:
            topics = tuple(make(module.MetadataRequestTopic, name=n) for n in names)
    fields: dict[str, Any] = {"topics": topics, "allow_auto_topic_creation": True}
    if version == 12:
        fields["include_topic_authorized_operations"] = False
    return make(module.MetadataRequest, **fields)


async def test_metadata_lists_brokers_topics_ids_and_refuses_unknown_topics(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    topic_id = await broker.create_topic("meta", partitions=2)
    await broker.create_topic("__yak_internal")
    answer = await kafka.call(METADATA, 12, metadata(["meta", "absent", "__yak_internal"]))
    ((node, host, port),) = [(b.node_id, b.host, b.port) for b in answer.brokers]
    assert (node, host, port) == (0, "127.0.0.1", kafka_port(broker.broker))
    assert answer.cluster_id == "local"
    assert answer.controller_id == 0
    meta, absent, internal = answer.topics
    assert (meta.error_code, meta.topic_id, meta.is_internal) == (0, uuid.UUID(topic_id), False)
    assert [
        (p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in meta.partitions
    ] == [
        (0, 0, (0,), (0,)),
        (1, 0, (0,), (0,)),
    ]
    assert absent.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION: never auto-created
    assert "absent" not in broker.broker.snapshot().topics
    assert internal.is_internal


async def test_metadata_of_all_topics_and_an_older_version(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("everything")
    answer = await kafka.call(METADATA, 5, metadata(None, version=5))
    assert [t.name for t in answer.topics] == ["everything"]
    assert answer.topics[0].partitions[0].offline_replicas == ()  # v5 has no leader epoch


async def test_a_leader_without_a_kafka_listener_is_not_handed_out(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.register_peer(1)  # registered without a Kafka port
    await broker.create_topic("elsewhere", leader=1, replicas=(1, 0))
    answer = await kafka.call(METADATA, 12, metadata(["elsewhere"]))
    assert [b.node_id for b in answer.brokers] == [0]
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.leader_id) == (5, -1)  # LEADER_NOT_AVAILABLE


async def test_produce_v7_and_v9_append_and_fetch_reads_them_back(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("both")
    first = await kafka.call(PRODUCE, 7, produce_request("both", batch(b"a", b"b"), acks=-1))
    assert first.responses[0].partition_responses[0].base_offset == 0
    data = make(produce9.PartitionProduceData, index=0, records=batch(b"c"))
    request9 = make(
        produce9.ProduceRequest,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(make(produce9.TopicProduceData, name="both", partition_data=(data,)),),
    )
    second = await kafka.call(PRODUCE, 9, request9)
    assert second.responses[0].partition_responses[0].base_offset == 2
    fetched = await kafka.call(FETCH, 11, fetch_request("both", 0, max_wait_ms=0))
    (partition,) = fetched.responses[0].partitions
    assert partition.high_watermark == 3
    assert [r.value for r in iter_records(partition.records)] == [b"a", b"b", b"c"]


async def test_a_legacy_batch_is_refused_and_its_neighbour_appended(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("formats", partitions=2)
    legacy = bytearray(batch(b"old"))
    legacy[16] = 1  # magic 1: Kafka's message format v1
    partitions = (
        make(produce9.PartitionProduceData, index=0, records=bytes(legacy)),
        make(produce9.PartitionProduceData, index=1, records=batch(b"new")),
    )
    request = make(
        produce9.ProduceRequest,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(make(produce9.TopicProduceData, name="formats", partition_data=partitions),),
    )
    answer = await kafka.call(PRODUCE, 9, request)
    old, new = answer.responses[0].partition_responses
    assert old.error_code == 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert (new.error_code, new.base_offset) == (0, 0)
    replica = broker.broker.replicas.replicas
    assert [replica[tp].log.log_end_offset for tp in sorted(replica)] == [0, 1]


def fetch12_request(topic: str, offset: int, session_epoch: int = -1) -> Any:
    partition = make(
        fetch12.FetchPartition, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return make(
        fetch12.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=1,
        session_id=0,
        session_epoch=session_epoch,
        topics=(make(fetch12.FetchTopic, topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


async def test_fetch_v12_full_fetch_opens_a_session_and_an_unknown_one_is_refused(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("sessionless")
    await kafka.call(PRODUCE, 7, produce_request("sessionless", batch(b"x")))
    full = await kafka.call(FETCH, 12, fetch12_request("sessionless", 0, session_epoch=0))
    assert full.error_code == 0
    assert full.session_id > 0
    assert [r.value for r in iter_records(full.responses[0].partitions[0].records)] == [b"x"]
    stale = await kafka.call(FETCH, 12, fetch12_request("sessionless", 1, session_epoch=3))
    assert stale.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND


async def test_fetch_out_of_range_reports_the_bounds(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("bounds")
    fetched = await kafka.call(FETCH, 11, fetch_request("bounds", 5, max_wait_ms=0))
    (partition,) = fetched.responses[0].partitions
    assert (partition.error_code, partition.high_watermark) == (1, 0)  # OFFSET_OUT_OF_RANGE


def list_offsets(topic: str, timestamp: int) -> Any:
    partition = make(list7.ListOffsetsPartition, partition_index=0, timestamp=timestamp)
    return make(
        list7.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(make(list7.ListOffsetsTopic, name=topic, partitions=(partition,)),),
    )


async def test_list_offsets_finds_the_record_not_only_its_batch(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("times")
    records = encode_batch(
        [RecordInput(key=None, value=b"v%d" % t, timestamp=t) for t in (100, 200, 300, 250)]
    )
    await kafka.call(PRODUCE, 7, produce_request("times", records))

    async def ask(timestamp: int) -> tuple[int, int, int]:
        answer = await kafka.call(LIST_OFFSETS, 7, list_offsets("times", timestamp))
        p = answer.topics[0].partitions[0]
        assert p.error_code == 0
        return p.offset, p.timestamp, p.leader_epoch

    assert await ask(150) == (1, 200, 0)
    assert await ask(260) == (2, 300, 0)
    assert (await ask(301))[0] == -1
    assert (await ask(-1))[0] == 4  # latest: the high watermark
    assert (await ask(-2))[0] == 0  # earliest
    assert await ask(-3) == (2, 300, 0)  # the record with the largest timestamp


async def test_init_producer_id_hands_out_distinct_ids_and_refuses_transactions(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    def request(transactional_id: str | None) -> Any:
        return make(
            InitProducerIdRequest,
            transactional_id=transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60),
        )

    first = await kafka.call(22, 4, request(None))
    second = await kafka.call(22, 4, request(None))
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert second.producer_id != first.producer_id
    assert (await kafka.call(22, 4, request("txn"))).error_code == 42  # INVALID_REQUEST
    # The ids come from the same blocks as the rest-proxy's producer sessions.
    assert await broker.store.get(broker.keyspace.producer_id_block) is not None


async def test_find_coordinator_has_no_transaction_coordinator(
    kafka: KafkaTestConnection,
) -> None:
    # Group keys: tests/unit/broker/kafka/test_group_apis.py.
    request = make(FindCoordinatorRequest, key_type=1, coordinator_keys=("t1", "t2"))
    answer = await kafka.call(10, 4, request)
    assert [(c.key, c.error_code) for c in answer.coordinators] == [("t1", 15), ("t2", 15)]


async def test_offset_for_leader_epoch_answers_the_epochs_end(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    await broker.create_topic("epochs")
    await kafka.call(PRODUCE, 7, produce_request("epochs", batch(b"a", b"b")))
    partition = make(epoch4.OffsetForLeaderPartition, partition=0, leader_epoch=0)
    request = make(
        epoch4.OffsetForLeaderEpochRequest,
        replica_id=-1,
        topics=(make(epoch4.OffsetForLeaderTopic, topic="epochs", partitions=(partition,)),),
    )
    answer = await kafka.call(23, 4, request)
    (result,) = answer.topics[0].partitions
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 0, 2)


def legacy_produce(version: int, acks: int) -> bytes:
    """A Produce v0-v2 body (kio has no schema below v3): two partitions of one topic."""
    records = batch(b"old")
    body = struct.pack(">hii", acks, 5_000, 1) + struct.pack(">h", 6) + b"legacy"
    body += struct.pack(">i", 2)
    for index in (0, 1):
        body += struct.pack(">ii", index, len(records)) + records
    return body


@pytest.mark.parametrize("version", [0, 2])
async def test_produce_v0_to_v2_is_refused_per_partition(
    broker: BrokerHarness, kafka: KafkaTestConnection, version: int
) -> None:
    await broker.create_topic("legacy", partitions=2)
    kafka.writer.write(request_frame(PRODUCE, version, 41, legacy_produce(version, acks=1)))
    data = await kafka.read_frame()
    (correlation_id, topics, name_length) = struct.unpack_from(">iih", data)
    assert (correlation_id, topics, data[10 : 10 + name_length]) == (41, 1, b"legacy")
    rest = data[10 + name_length :]
    (count,) = struct.unpack_from(">i", rest)
    width = 22 if version == 2 else 14
    entries = [struct.unpack_from(">ihq", rest, 4 + i * width) for i in range(count)]
    assert entries == [(0, 43, -1), (1, 43, -1)]  # UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert len(rest) == 4 + count * width + (4 if version >= 1 else 0)
    # acks=0: nothing answered; the next request's answer comes next.
    kafka.writer.write(request_frame(PRODUCE, version, 42, legacy_produce(version, acks=0)))
    answer = await kafka.call(METADATA, 12, metadata(["legacy"]))
    assert answer.topics[0].error_code == 0
    assert all(r.log.log_end_offset == 0 for r in broker.broker.replicas.replicas.values())


async def test_a_topic_whose_partitions_are_not_written_is_not_available_yet(
    broker: BrokerHarness, kafka: KafkaTestConnection
) -> None:
    """The controller writes a topic's record, then its partition states: between the two, the
    topic is retriably unavailable, never a topic of no partitions (librdkafka took that for
    good); etcd holds nothing newer, so the answer does not wait."""
    record = TopicRecord(
        name="half", topic_id=uuid.uuid4().hex, partitions=2, replication_factor=1, created_at_ms=0
    )
    await broker.store.put(broker.keyspace.topic("half"), record.encode())
    await broker.broker.wait_for_metadata(lambda snap: "half" in snap.topics, 5.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    named = await kafka.call(METADATA, 12, metadata(["half"]))
    listed = await kafka.call(METADATA, 12, metadata(None))
    assert loop.time() - started < 1.0
    for answer in (named, listed):
        (half,) = answer.topics
        assert (half.name, half.error_code, half.partitions) == ("half", 5, ())


async def test_metadata_waits_for_a_topic_the_watch_has_not_delivered(tmp_path: Path) -> None:
    """A topic made through one broker's CreateTopics is described whole by any other, though
    that broker's watch lags etcd (a client's Metadata goes to any broker)."""
    store = LaggingStore(SystemClock())
    settings = BrokerSettings(data_dir=tmp_path / "broker-0", controlled_shutdown_timeout_s=0.0)
    app = create_app(settings, store_factory=lambda _url: store)
    keyspace = Keyspace(settings.cluster_id)
    async with app.router.lifespan_context(app):
        kafka = await KafkaTestConnection.open(kafka_port(app.state.broker))
        try:
            store.gate.clear()
            record = TopicRecord(
                name="fresh",
                topic_id=uuid.uuid4().hex,
                partitions=2,
                replication_factor=1,
                created_at_ms=0,
            )
            await store.put(keyspace.topic("fresh"), record.encode())
            for p in (0, 1):
                state = PartitionState(
                    topic="fresh", partition=p, leader=0, replicas=(0,), isr=(0,)
                )
                await store.put(keyspace.partition("fresh", p), state.encode())
            pending = asyncio.create_task(kafka.call(METADATA, 12, metadata(["fresh", "absent"])))
            await asyncio.sleep(0.1)
            assert not pending.done()
            store.gate.set()
            fresh, absent = (await asyncio.wait_for(pending, 5.0)).topics
            assert fresh.error_code == 0
            assert [p.partition_index for p in fresh.partitions] == [0, 1]
            assert absent.error_code == 3
        finally:
            await kafka.close()
