"""DeleteRecords at the leader, spoken with kio: the log start moves, -1 is the high
watermark, bad offsets and partitions led elsewhere get Kafka's errors; and DescribeCluster
(brokers; controllers refused as a Kafka broker refuses them)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.delete_records.v2 import request as delete2
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v2 import request as describe_cluster2

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.admin_harness import AdminBench, make
from yak.record import RecordInput, encode_batch
from yak.types import TopicPartition
from yak_broker.kafka.delete_records import handle_delete_records
from yak_broker.kafka.describe_cluster import handle_describe_cluster

DELETE_RECORDS, DESCRIBE_CLUSTER = 21, 60


def request(topic: str, *offsets: tuple[int, int]) -> Any:
    partitions = tuple(
        make(delete2.DeleteRecordsPartition, partition_index=p, offset=o) for p, o in offsets
    )
    return make(
        delete2.DeleteRecordsRequest,
        topics=(make(delete2.DeleteRecordsTopic, name=topic, partitions=partitions),),
        timeout=datetime.timedelta(seconds=5),
    )


async def test_delete_records_moves_the_log_start_at_the_leader(broker: BrokerHarness) -> None:
    bench = await AdminBench.open(broker)
    await broker.create_topic("trim", 3)
    await broker.register_peer(1)
    await broker.set_partition("trim", 2, leader=1, replicas=(1, 0))
    for partition in (0, 1):
        records = [RecordInput(key=None, value=b"v", timestamp=1)] * 5
        await broker.client.produce_one("trim", partition, encode_batch(records), acks=1)
    answer = await bench.call(
        handle_delete_records,
        DELETE_RECORDS,
        2,
        request("trim", (0, 3), (1, -1), (2, 0), (3, 0), (0, 99), (0, -5)),
    )
    results = [
        (p.partition_index, p.low_watermark, p.error_code) for p in answer.topics[0].partitions
    ]
    assert results == [
        (0, 3, 0),
        (1, 5, 0),  # -1: up to the high watermark
        (2, -1, 6),  # NOT_LEADER_OR_FOLLOWER: broker 1 leads it
        (3, -1, 3),  # UNKNOWN_TOPIC_OR_PARTITION
        (0, -1, 1),  # OFFSET_OUT_OF_RANGE: above the high watermark
        (0, -1, 1),
    ]
    replica, _ = broker.broker.replicas.leader(TopicPartition("trim", 0))
    assert replica.log.log_start_offset == 3


async def test_describe_cluster_lists_the_kafka_brokers(broker: BrokerHarness) -> None:
    bench = await AdminBench.open(broker)
    await broker.register_peer(1)  # without a Kafka listener: left out
    answer = await bench.call(
        handle_describe_cluster,
        DESCRIBE_CLUSTER,
        0,
        make(DescribeClusterRequest, include_cluster_authorized_operations=False),
    )
    assert (answer.error_code, answer.cluster_id, answer.controller_id) == (0, "local", 0)
    assert [(b.broker_id, b.host) for b in answer.brokers] == [(0, "127.0.0.1")]


async def test_delete_records_needs_delete_on_the_topic(broker: BrokerHarness) -> None:
    bench = await AdminBench.open(broker)
    await broker.create_topic("kept")
    bench.secure("User:dave")
    answer = await bench.call(handle_delete_records, DELETE_RECORDS, 2, request("kept", (0, -1)))
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.low_watermark) == (29, -1)


async def test_describe_cluster_v2_endpoint_types(broker: BrokerHarness) -> None:
    bench = await AdminBench.open(broker)

    async def ask(endpoint_type: int) -> Any:
        body = make(
            describe_cluster2.DescribeClusterRequest,
            include_cluster_authorized_operations=False,
            endpoint_type=endpoint_type,
            include_fenced_brokers=True,
        )
        return await bench.call(handle_describe_cluster, DESCRIBE_CLUSTER, 2, body)

    brokers = await ask(1)
    assert (brokers.error_code, brokers.endpoint_type, brokers.controller_id) == (0, 1, 0)
    assert [(b.broker_id, b.is_fenced) for b in brokers.brokers] == [(0, False)]
    controllers = await ask(2)
    assert (controllers.error_code, controllers.brokers) == (114, ())  # MISMATCHED_ENDPOINT_TYPE
    assert (await ask(7)).error_code == 115  # UNSUPPORTED_ENDPOINT_TYPE
