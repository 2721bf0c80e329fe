"""Real Kafka clients against a real cluster (etcd, a coordinator, 3 brokers, a rest-proxy, one
cluster for the module): kafka-python and confluent-kafka (librdkafka) produce keyed records
with headers — acks=all, confluent-kafka idempotent, gzip, lz4, zstd and snappy across them —
and read them back with ``assign`` (no group yet); every record sits on the partition Kafka's
partitioner picks for its key, and at exactly the offset, with the key, value and headers the
REST API reads there. Then each of confluent-kafka, kafka-python and aiokafka alone
(parametrised by client, ``client_io``): an idempotent acks=all producer per codec the client
has sends keyed records with headers, the REST API shows each exactly once, and the client
reads exactly those records at those offsets, then seeks every partition and reads exactly
what follows. The reverse: records produced over HTTP are read by each client. Last, the
benchmark's ``yak-kafka`` driver (``loadtest.peers``) runs a few seconds at 200 msg/s and drains
a 500-record backlog without errors, and its idle probe (a bare-socket Produce v9 client)
produces one record a request, offset after offset. Fetch sessions (KIP-227): kafka-python's
consumer (sessions on by default; librdkafka sends sessionless fetches) reads every record of
two waves, the second produced while it idles, and the brokers count incremental fetches.
(The folder is not named ``kafka``: it would shadow kafka-python's package.)"""

from __future__ import annotations

import asyncio
import base64
import time
import warnings
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentPartition
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():
    # kafka-python 3 loads its schemas with importlib.resources.read_text (deprecated).
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPartition
from loadtest.kafka_bench.idle import bare_socket
from loadtest.local_cluster import LocalCluster
from loadtest.peers.drivers.yak_kafka import YakKafkaDriver
from loadtest.peers.runner import Runner
from loadtest.peers.workload import Workload
from tests.integration.kafka_protocol.client_io import (
    CLIENTS,
    CODECS,
    Records,
    outgoing,
    produce,
    read_and_seek,
)
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.partitioner import partition_for_key

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 3
#: Where the seek cells move every partition's position to.
SEEK_TO = 3


def kafka_python_produce(bootstrap: str, topic: str, codec: str, tag: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=codec)
    try:
        for i in range(6):
            producer.send(
                topic,
                key=f"{tag}-{i}".encode(),
                value=f"{codec} value {i}".encode() * 20,
                headers=[("client", b"kafka-python"), ("n", str(i).encode())],
            ).get(timeout=30)
    finally:
        producer.close()


def confluent_produce(bootstrap: str, topic: str, codec: str, tag: str) -> None:
    producer = ConfluentProducer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": codec,
            "partitioner": "murmur2_random",  # Kafka's Java partitioner, as Yak's
        }
    )
    errors: list[object] = []
    for i in range(6):
        producer.produce(
            topic,
            key=f"{tag}-{i}".encode(),
            value=f"{codec} value {i}".encode() * 20,
            headers=[("client", b"confluent"), ("n", str(i).encode())],
            on_delivery=lambda error, _message: errors.append(error) if error else None,
        )
    assert producer.flush(30) == 0
    assert errors == []


def kafka_python_read(bootstrap: str, topic: str, count: int) -> Records:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=5_000,
    )
    try:
        consumer.assign([KafkaPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        found: Records = {}
        for message in consumer:
            headers = tuple((k, bytes(v)) for k, v in message.headers)
            found[message.partition, message.offset] = (message.key, message.value, headers)
            if len(found) == count:
                break
        return found
    finally:
        consumer.close()


def confluent_read(bootstrap: str, topic: str, count: int) -> Records:
    consumer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ConfluentPartition(topic, p, 0) for p in range(PARTITIONS)])
        found: Records = {}
        deadline = time.monotonic() + 30
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            record: Any = message  # confluent-kafka's stubs type key/value as str | bytes
            headers = tuple((k, bytes(v)) for k, v in record.headers() or [])
            found[record.partition(), record.offset()] = (record.key(), record.value(), headers)
        return found
    finally:
        consumer.close()


async def rest_read(cluster: LocalCluster, topic: str) -> Records:
    found: Records = {}
    params: dict[str, str | int] = {
        "offset": 0,
        "key_encoding": "base64",
        "value_encoding": "base64",
        "header_encoding": "base64",
    }
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        for partition in range(PARTITIONS):
            answer = await proxy.get(
                f"/api/v1/topics/{topic}/partitions/{partition}/records",
                params=params,
            )
            assert answer.status_code == 200, answer.text
            for r in answer.json()["records"]:
                found[partition, r["offset"]] = (
                    _unbase64(r["key"]),
                    _unbase64(r["value"]),
                    tuple((h["key"], _unbase64(h["value"]) or b"") for h in r["headers"]),
                )
    return found


def _unbase64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def check_partitioning(records: Records) -> None:
    for (partition, _offset), (key, _value, _headers) in records.items():
        assert key is not None
        assert partition == partition_for_key(key, PARTITIONS), key


async def test_kafka_clients_produce_what_rest_reads_and_read_it_back(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic, snappy = unique("kafka-in"), unique("kafka-snappy")
    for name in (topic, snappy):
        await create_topic(cluster, name, partitions=PARTITIONS, replication_factor=3)
    await asyncio.gather(
        asyncio.to_thread(kafka_python_produce, bootstrap, topic, "gzip", "kp-gzip"),
        asyncio.to_thread(kafka_python_produce, bootstrap, topic, "lz4", "kp-lz4"),
        asyncio.to_thread(confluent_produce, bootstrap, topic, "zstd", "ck-zstd"),
        asyncio.to_thread(confluent_produce, bootstrap, snappy, "snappy", "ck-snappy"),
    )
    over_rest = await rest_read(cluster, topic)
    assert len(over_rest) == 18
    check_partitioning(over_rest)
    by_key = {key: headers for key, _value, headers in over_rest.values()}
    assert by_key[b"ck-zstd-3"] == (("client", b"confluent"), ("n", b"3"))
    assert by_key[b"kp-lz4-5"] == (("client", b"kafka-python"), ("n", b"5"))
    assert await asyncio.to_thread(kafka_python_read, bootstrap, topic, 18) == over_rest
    assert await asyncio.to_thread(confluent_read, bootstrap, topic, 18) == over_rest
    # Snappy apart: kafka-python needs python-snappy to read it, which Yak does not bring.
    snappy_over_rest = await rest_read(cluster, snappy)
    assert len(snappy_over_rest) == 6
    check_partitioning(snappy_over_rest)
    assert await asyncio.to_thread(confluent_read, bootstrap, snappy, 6) == snappy_over_rest


@pytest.mark.parametrize("client", CLIENTS)
async def test_client_produces_every_codec_idempotently_and_reads_and_seeks_what_rest_reads(
    cluster: LocalCluster, bootstrap: str, client: str
) -> None:
    topic = unique("matrix-in")
    await create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3)
    sent = {codec: outgoing(client, codec, 8) for codec in CODECS[client]}
    await asyncio.gather(*(produce(client, bootstrap, topic, c, rs) for c, rs in sent.items()))
    over_rest = await rest_read(cluster, topic)
    check_partitioning(over_rest)
    sent_records = sorted((k, v, tuple(h)) for rs in sent.values() for k, v, h in rs)
    assert sorted(over_rest.values()) == sent_records  # each exactly once, as sent
    everything, after_seek = await read_and_seek(
        client, bootstrap, topic, PARTITIONS, len(over_rest), SEEK_TO
    )
    assert everything == over_rest
    assert after_seek == {at: r for at, r in over_rest.items() if at[1] >= SEEK_TO}
    assert len(after_seek) < len(over_rest)


@pytest.mark.parametrize("client", CLIENTS)
async def test_records_produced_over_http_are_read_by_kafka_clients(
    cluster: LocalCluster, bootstrap: str, client: str
) -> None:
    topic = unique("http-in")
    await create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3)
    body = {
        "key_encoding": "string",
        "value_encoding": "string",
        "records": [
            {
                "key": f"user-{i}",
                "value": f"event {i}",
                "headers": [{"key": "source", "value": "http"}],
            }
            for i in range(9)
        ],
    }
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        answer = await proxy.post(f"/api/v1/topics/{topic}/records", json=body)
        assert answer.status_code == 200, answer.text
    over_rest = await rest_read(cluster, topic)
    assert len(over_rest) == 9
    check_partitioning(over_rest)
    assert {v for _k, v, _h in over_rest.values()} == {f"event {i}".encode() for i in range(9)}
    everything, _ = await read_and_seek(client, bootstrap, topic, PARTITIONS, 9, seek_to=0)
    assert everything == over_rest


def incremental_fetches(cluster: LocalCluster) -> float:
    """Incremental consumer fetches the brokers served (``yak_broker_kafka_fetches_total``)."""
    total = 0.0
    for broker_id in cluster.broker_ports:
        text = httpx.get(f"{cluster.broker_url(broker_id)}/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "yak_broker_kafka_fetches_total":
                    total += sample.value if sample.labels["kind"] == "incremental" else 0
    return total


def kafka_python_read_in_session(
    bootstrap: str, topic: str, first: int, more: Callable[[], int]
) -> Records:
    """Read ``first`` records, call ``more`` (which produces the rest) while the consumer's
    sessions idle, then read until ``more``'s count is in too."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([KafkaPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        found: Records = {}
        goal, deadline = first, time.monotonic() + 30
        while time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                for m in batch:
                    headers = tuple((k, bytes(v)) for k, v in m.headers)
                    found[m.partition, m.offset] = (m.key, m.value, headers)
            if len(found) >= goal:
                if goal != first:
                    return found
                for _ in range(5):
                    assert not consumer.poll(timeout_ms=200)  # idle rounds: nothing new
                goal = first + more()
        return found
    finally:
        consumer.close()


async def test_kafka_python_consumes_every_record_through_incremental_fetch_sessions(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic = unique("sessions")
    await create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3)
    await asyncio.to_thread(confluent_produce, bootstrap, topic, "zstd", "wave-1")
    before = await asyncio.to_thread(incremental_fetches, cluster)

    def second_wave() -> int:
        confluent_produce(bootstrap, topic, "lz4", "wave-2")
        return 6

    read = await asyncio.to_thread(kafka_python_read_in_session, bootstrap, topic, 6, second_wave)
    over_rest = await rest_read(cluster, topic)
    assert len(over_rest) == 12
    assert read == over_rest
    assert await asyncio.to_thread(incremental_fetches, cluster) > before


async def test_the_benchmark_driver_produces_and_consumes_through_the_kafka_listener(
    cluster: LocalCluster, bootstrap: str
) -> None:
    steady = Workload(
        "kafka-smoke-steady",
        partitions_per_topic=2,
        message_size=256,
        producer_rate=200,
        duration_s=2.0,
        warmup_s=0.5,
    )
    backlog = Workload(
        "kafka-smoke-backlog", partitions_per_topic=2, message_size=256, backlog_records=500
    )
    driver = YakKafkaDriver(cluster.proxy_url(0))
    try:
        assert set((await driver.bootstrap()).split(",")) == set(bootstrap.split(","))
        ran = await Runner(driver, steady).run()
        drained = await Runner(driver, backlog).run()
    finally:
        await driver.aclose()
    assert ran.errors == 0
    assert ran.published >= 0.8 * 200 * steady.duration_s
    assert ran.consumed >= 0.8 * ran.published
    assert 0 < ran.e2e_latency.p50 < 2_000
    assert drained.errors == 0
    assert drained.consumed == 500


async def test_the_benchmark_idle_probe_produces_offset_after_offset(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic = unique("idle-probe")
    await create_topic(cluster, topic, partitions=1, replication_factor=3)
    async with httpx.AsyncClient(base_url=cluster.coordinator_url, timeout=30) as admin:
        described = (await admin.get(f"/admin/v1/topics/{topic}")).json()
        leader = described["partitions"][0]["leader"]
        brokers = (await admin.get("/admin/v1/cluster")).json()["brokers"]
    (address,) = [b["kafka"] for b in brokers if b["broker_id"] == leader]
    seconds = await asyncio.to_thread(bare_socket, address, topic, 0, 1, 5, 20)
    assert len(seconds) == 20
    assert all(0 < s < 5 for s in seconds)
    # acks=1: the followers may not have the last records yet, so the high watermark (what a
    # read sees) catches up after the probe; long polls from the next offset until it has.
    offsets: list[int] = []
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        async with asyncio.timeout(20):
            while len(offsets) < 25:
                answer = await proxy.get(
                    f"/api/v1/topics/{topic}/partitions/0/records",
                    params={"offset": len(offsets), "timeout_ms": 2_000},
                )
                assert answer.status_code == 200, answer.text
                offsets += [r["offset"] for r in answer.json()["records"]]
    assert offsets == list(range(25))  # the warm-up's 5 and the 20 measured: no gap, none twice
