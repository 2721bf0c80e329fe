"""The Kafka listener's framing, in-process: answers in request order behind a slow request,
acks=0 without an answer, unsupported APIs and versions, oversized frames and garbage bytes."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.fetch.v11 import request as fetch11
from kio.schema.metadata.v12 import request as metadata12
from kio.schema.produce.v7 import request as produce7

from tests.unit.broker.broker_harness import BrokerHarness
from tests.unit.broker.kafka.kafka_test_client import (
    KafkaTestConnection,
    kafka_port,
    request_frame,
)
from yak.record import RecordInput, encode_batch
from yak_broker.kafka.dispatch import APIS

API_VERSIONS, METADATA, FETCH, PRODUCE = 18, 3, 1, 0


def make(entity: Any, **fields: Any) -> Any:
    """A kio entity from plain values (kio's phantom int types are plain ints at run time)."""
    return entity(**fields)


def batch(*values: bytes) -> bytes:
    return encode_batch([RecordInput(key=None, value=v, timestamp=1) for v in values])


def produce_request(topic: str, records: bytes, acks: int = 1) -> Any:
    data = make(produce7.PartitionProduceData, index=0, records=records)
    return make(
        produce7.ProduceRequest,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(make(produce7.TopicProduceData, name=topic, partition_data=(data,)),),
    )


def fetch_request(topic: str, offset: int, max_wait_ms: int) -> Any:
    partition = make(
        fetch11.FetchPartition, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return make(
        fetch11.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        topics=(make(fetch11.FetchTopic, topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def metadata_request() -> Any:
    return make(
        metadata12.MetadataRequest,
        topics=(),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


async def connect(broker: BrokerHarness) -> KafkaTestConnection:
    return await KafkaTestConnection.open(kafka_port(broker.broker))


async def test_api_versions_lists_the_dispatch_table(broker: BrokerHarness) -> None:
    connection = await connect(broker)
    answer = await connection.call(
        API_VERSIONS,
        3,
        make(ApiVersionsV3, client_software_name="t", client_software_version="1"),
    )
    assert answer.error_code == 0
    served = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert served == {key: (api.min_version, api.max_version) for key, api in APIS.items()}
    assert served[PRODUCE] == (0, 9)  # v0-v2 listed, refused per partition
    assert served[FETCH] == (4, 12)
    await connection.close()


async def test_an_unsupported_api_versions_version_gets_kafkas_v0_answer(
    broker: BrokerHarness,
) -> None:
    connection = await connect(broker)
    # A client newer than the broker asks v9: the header parses, the body is not read.
    frame = request_frame(API_VERSIONS, 0, 7, make(ApiVersionsV0))
    connection.writer.write(frame[:6] + struct.pack(">h", 9) + frame[8:])
    correlation_id, answer = await connection.receive(API_VERSIONS, 0)
    assert correlation_id == 7
    assert answer.error_code == 35  # UNSUPPORTED_VERSION
    assert {k.api_key for k in answer.api_keys} == set(APIS)
    # The connection stays usable: the client retries with a version from the list.
    retried = await connection.call(API_VERSIONS, 0, make(ApiVersionsV0))
    assert retried.error_code == 0
    await connection.close()


async def test_answers_keep_request_order_behind_a_slow_fetch(broker: BrokerHarness) -> None:
    await broker.create_topic("ordered")
    connection = await connect(broker)
    slow = connection.send(FETCH, 11, fetch_request("ordered", 0, max_wait_ms=400))
    fast = connection.send(METADATA, 12, metadata_request())
    quiet = connection.send(PRODUCE, 7, produce_request("ordered", batch(b"dropped"), acks=0))
    last = connection.send(
        API_VERSIONS, 3, make(ApiVersionsV3, client_software_name="t", client_software_version="1")
    )
    first_id, fetched = await connection.receive(FETCH, 11)
    assert first_id == slow
    # The acks=0 produce, served while the fetch waited, woke it with its record.
    (partition,) = fetched.responses[0].partitions
    assert partition.high_watermark == 1
    assert (await connection.receive(METADATA, 12))[0] == fast
    # The acks=0 produce takes its turn without an answer: ApiVersions is next.
    assert (await connection.receive(API_VERSIONS, 3))[0] == last
    assert quiet not in (slow, fast, last)
    await connection.close()


async def test_a_fast_answer_waits_for_the_slow_one_ahead_of_it(broker: BrokerHarness) -> None:
    await broker.create_topic("waiting")
    connection = await connect(broker)
    connection.send(FETCH, 11, fetch_request("waiting", 0, max_wait_ms=300))
    connection.send(METADATA, 12, metadata_request())
    started = asyncio.get_running_loop().time()
    await connection.read_frame()
    # Nothing was written before the fetch's long poll ended, though Metadata was done first.
    assert asyncio.get_running_loop().time() - started >= 0.25
    await connection.read_frame(timeout_s=1)
    await connection.close()


async def test_an_unknown_api_key_closes_the_connection(broker: BrokerHarness) -> None:
    connection = await connect(broker)
    connection.writer.write(struct.pack(">ihhih", 10, 999, 0, 1, -1))
    assert await connection.closed_by_peer()
    await connection.close()


async def test_an_unsupported_version_of_another_api_closes_the_connection(
    broker: BrokerHarness,
) -> None:
    connection = await connect(broker)
    connection.writer.write(struct.pack(">ihhih", 10, METADATA, 99, 1, -1))
    assert await connection.closed_by_peer()
    await connection.close()


async def test_an_oversized_frame_closes_the_connection(broker: BrokerHarness) -> None:
    connection = await connect(broker)
    limit = broker.broker.settings.max_request_bytes
    connection.writer.write(struct.pack(">i", limit + 1) + b"\x00" * 64)
    assert await connection.closed_by_peer()
    await connection.close()


async def test_garbage_closes_the_connection_and_the_broker_keeps_serving(
    broker: BrokerHarness,
) -> None:
    await broker.create_topic("intact")
    for body in (b"\xff" * 40, b"", b"\x00\x01\x02"):
        connection = await connect(broker)
        connection.writer.write(request_frame(METADATA, 12, 1, body))
        assert await connection.closed_by_peer()
        await connection.close()
    connection = await connect(broker)
    connection.writer.write(struct.pack(">i", 3) + b"abc")  # not even a header
    assert await connection.closed_by_peer()
    await connection.close()
    # A produce whose body is cut short is refused whole: nothing of it is appended.
    connection = await connect(broker)
    whole = request_frame(PRODUCE, 7, 1, produce_request("intact", batch(b"x")))
    cut = whole[4:-5]
    connection.writer.write(struct.pack(">i", len(cut)) + cut)
    assert await connection.closed_by_peer()
    await connection.close()
    connection = await connect(broker)
    answer = await connection.call(PRODUCE, 7, produce_request("intact", batch(b"ok")))
    assert answer.responses[0].partition_responses[0].base_offset == 0
    await connection.close()
