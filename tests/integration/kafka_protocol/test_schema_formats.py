"""The schema formats across clients, on a real cluster (etcd, a coordinator, 3 brokers with
Kafka listeners, this package's module cluster) with a real ``yak-schema-registry`` process
and a rest-proxy given its URL (``YAK_SCHEMA_REGISTRY_URL``):

* Avro, JSON Schema and Protobuf values produced over v2 HTTP (inline schema) are read back by
  a v2 consumer of that format;
* cross-client: a ``confluent_kafka`` Consumer with Confluent's ``AvroDeserializer`` reads
  through the Kafka listener what HTTP wrote, and an HTTP avro consumer reads what a
  confluent-kafka Producer with ``AvroSerializer`` wrote (both against the same registry);
* a record the schema refuses, a bad schema and an unknown id are refused with Confluent's
  codes and write nothing.

One registry and one proxy process for the module (started on the module's cluster)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from yak.etcd_server import free_ports
from yak.supervisor import ProcessSpec

pytestmark = pytest.mark.integration

PROXY = 1  # the module cluster's proxy 0 has no registry; this one has
USER = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "n", "type": "int"}],
}
SCHEMAS = {
    "avro": json.dumps(USER),
    "jsonschema": json.dumps(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["name", "n"],
        }
    ),
    "protobuf": 'syntax = "proto3"; message User { string name = 1; int32 n = 2; }',
}


@pytest.fixture(scope="module")
def registry_url(cluster: LocalCluster) -> str:
    (port,) = free_ports(1)
    script = str(Path(sys.executable).with_name("yak-schema-registry"))
    cluster.supervisor.start(
        ProcessSpec(
            name="schema-registry",
            argv=(script, "--host", "127.0.0.1", "--port", str(port)),
            log_path=cluster.folder / "logs" / "schema-registry.log",
            health_url=f"http://127.0.0.1:{port}/readyz",
            url=f"http://127.0.0.1:{port}",
            env={"YAK_ETCD": cluster.etcd.endpoint, "YAK_CLUSTER_ID": cluster.cluster_id},
        )
    )
    url = f"http://127.0.0.1:{port}"
    cluster.start_proxy(PROXY, YAK_SCHEMA_REGISTRY_URL=url)
    return url


@pytest.fixture
def confluent_registry(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as client:
        yield client


@pytest.fixture
def http(registry_url: str, cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.proxy_url(PROXY), timeout=30) as client:
        yield client


def new_topic(cluster: LocalCluster, registry_url: str) -> str:
    topic = unique("schemas")
    asyncio.run(create_topic(cluster, topic, partitions=1, replication_factor=3))
    return topic


def media(fmt: str) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"


def read_http(http: httpx.Client, topic: str, fmt: str, count: int) -> list[dict[str, Any]]:
    """``count`` records of ``topic`` through a fresh v2 consumer of format ``fmt``."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    created = http.post(f"/consumers/{group}", json={"name": "c", "format": fmt})
    assert created.status_code == 200, created.text
    instance = f"/consumers/{group}/instances/c"
    partitions = {"partitions": [{"topic": topic, "partition": 0}]}
    assert http.post(f"{instance}/assignments", json=partitions).status_code == 204
    assert http.post(f"{instance}/positions/beginning", json=partitions).status_code == 204
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(found) < count and time.monotonic() < deadline:  # each GET long-polls
        answer = http.get(f"{instance}/records?timeout=1000", headers={"accept": media(fmt)})
        assert answer.status_code == 200, answer.text
        found += answer.json()
    http.delete(instance)
    return found


def end_offset(http: httpx.Client, topic: str) -> int:
    return int(http.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"])


@pytest.mark.parametrize("fmt", ["avro", "jsonschema", "protobuf"])
def test_http_produce_and_consume(
    cluster: LocalCluster, registry_url: str, http: httpx.Client, fmt: str
) -> None:
    topic = new_topic(cluster, registry_url)
    values = [{"name": f"u{i}", "n": i} for i in range(5)]
    body = {"value_schema": SCHEMAS[fmt], "records": [{"value": v} for v in values]}
    produced = http.post(f"/topics/{topic}", json=body, headers={"content-type": media(fmt)})
    assert produced.status_code == 200, produced.text
    assert produced.json()["value_schema_id"] is not None
    assert [r["value"] for r in read_http(http, topic, fmt, 5)] == values

    refused = http.post(
        f"/topics/{topic}",
        json={"value_schema": SCHEMAS[fmt], "records": [{"value": {"name": 1, "n": "x"}}]},
        headers={"content-type": media(fmt)},
    )
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42203)
    assert end_offset(http, topic) == 5


def test_confluent_deserializer_reads_what_http_wrote(
    cluster: LocalCluster,
    registry_url: str,
    http: httpx.Client,
    bootstrap: str,
    confluent_registry: SchemaRegistryClient,
) -> None:
    topic = new_topic(cluster, registry_url)
    values = [{"name": f"v{i}", "n": i} for i in range(4)]
    body = {"value_schema": SCHEMAS["avro"], "records": [{"value": v} for v in values]}
    produced = http.post(f"/topics/{topic}", json=body, headers={"content-type": media("avro")})
    assert produced.status_code == 200, produced.text
    deserializer = AvroDeserializer(confluent_registry)
    consumer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    read: list[Any] = []
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while len(read) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            raw: Any = message.value()
            read.append(deserializer(raw, ctx))
    finally:
        consumer.close()
    assert read == values


def test_http_reads_what_confluent_serializer_wrote(
    cluster: LocalCluster,
    registry_url: str,
    http: httpx.Client,
    bootstrap: str,
    confluent_registry: SchemaRegistryClient,
) -> None:
    topic = new_topic(cluster, registry_url)
    serializer = AvroSerializer(confluent_registry, SCHEMAS["avro"])
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "acks": "all"})
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [{"name": f"w{i}", "n": i * 10} for i in range(4)]
    for value in values:
        producer.produce(topic, value=serializer(value, ctx), partition=0)
    assert producer.flush(20) == 0
    assert [r["value"] for r in read_http(http, topic, "avro", 4)] == values


def test_bad_schema_and_unknown_id_write_nothing(
    cluster: LocalCluster, registry_url: str, http: httpx.Client
) -> None:
    topic = new_topic(cluster, registry_url)
    headers = {"content-type": media("avro")}
    bad = http.post(
        f"/topics/{topic}",
        json={"value_schema": '{"type": "record"}', "records": [{"value": {}}]},
        headers=headers,
    )
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42205)
    unknown = http.post(
        f"/topics/{topic}",
        json={"value_schema_id": 987654, "records": [{"value": {"name": "a", "n": 1}}]},
        headers=headers,
    )
    assert (unknown.status_code, unknown.json()["error_code"]) == (422, 42205)
    assert end_offset(http, topic) == 0
