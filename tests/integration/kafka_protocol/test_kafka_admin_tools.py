"""Kafka's admin APIs, kcat and a leader killed under an idempotent producer, against
a real cluster (etcd, a coordinator, 3 brokers, a rest-proxy; one cluster for the module).

- confluent-kafka's ``AdminClient`` creates a topic with configs (refusals and validate_only
  too), describes and alters them, adds partitions, deletes records and deletes the topic —
  and the coordinator's REST admin, ``yak topics describe`` and the proxy agree at each step;
- (aiokafka's keyed records with headers, read back by ``assign``, are in the client matrix:
  ``test_kafka_clients.py``);
- kcat lists the metadata (``-L``), produces (``-P``) and consumes (``-C -o beginning -e``);
- last (it kills a broker): librdkafka, idempotent with acks=all, sends a numbered sequence to
  an RF 3 partition while its leader gets SIGKILL; every delivery succeeds and the partition
  holds every number exactly once, in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

# confluent-kafka re-exports these from confluent_kafka.admin without naming them in __all__.
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewPartitions, NewTopic

from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


def rest_topic(cluster: LocalCluster, topic: str) -> httpx.Response:
    """The coordinator's REST view of a topic (``yak topics describe`` prints it)."""
    return httpx.get(f"{cluster.coordinator_url}/admin/v1/topics/{topic}", timeout=TIMEOUT_S)


def yak_cli(*args: str) -> str:
    """What the ``yak`` CLI prints (it reads the coordinator's REST admin)."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("yak")), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
        env={**os.environ, "COLUMNS": "200"},  # rich wraps table cells at 80 otherwise
    )
    return done.stdout


def settle(future: Any) -> Any:
    return future.result(timeout=TIMEOUT_S)


def confluent_admin_walk(cluster: LocalCluster, bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"retention.ms": "3600000", "cleanup.policy": "delete"}
    new = NewTopic(topic, num_partitions=2, replication_factor=3, config=configs)
    settle(admin.create_topics([new], operation_timeout=TIMEOUT_S)[topic])
    described = rest_topic(cluster, topic).json()
    assert (described["partition_count"], described["replication_factor"]) == (2, 3)
    assert described["configs"] == configs
    # every topic (librdkafka's all-topics Metadata v12 carries bytes past its fields)
    assert len(admin.list_topics(timeout=TIMEOUT_S).topics[topic].partitions) == 2
    refusals = {
        topic: "TOPIC_ALREADY_EXISTS",
        "__yak_mine": "POLICY_VIOLATION",
        f"{topic}-wide": "INVALID_REPLICATION_FACTOR",
    }
    factors = {f"{topic}-wide": 4}
    asked = [NewTopic(name, 1, factors.get(name, 1)) for name in refusals]
    for name, future in admin.create_topics(asked, operation_timeout=TIMEOUT_S).items():
        with pytest.raises(KafkaException, match=refusals[name]):
            settle(future)
    dry = NewTopic(f"{topic}-dry", 1, 3)
    settle(admin.create_topics([dry], validate_only=True)[dry.topic])
    assert rest_topic(cluster, dry.topic).status_code == 404  # validated, not created

    resource = ConfigResource("TOPIC", topic)
    entries = settle(admin.describe_configs([resource])[resource])
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    changes = [
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
    ]
    altered = ConfigResource("TOPIC", topic, incremental_configs=changes)
    settle(admin.incremental_alter_configs([altered])[altered])
    assert rest_topic(cluster, topic).json()["configs"] == {"retention.ms": "7200000"}
    printed = yak_cli("topics", "describe", topic, "--coordinator", cluster.coordinator_url)
    assert "retention.ms" in printed
    assert "7200000" in printed
    assert "cleanup.policy" not in printed
    entries = settle(admin.describe_configs([resource])[resource])
    assert entries["retention.ms"].value == "7200000"
    assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    settle(admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=TIMEOUT_S)[topic])
    assert rest_topic(cluster, topic).json()["partition_count"] == 4

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=f"r{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    (deletion,) = admin.delete_records([TopicPartition(topic, 0, 6)]).values()
    assert settle(deletion).low_watermark == 6
    earliest = {TopicPartition(topic, 0): OffsetSpec.earliest()}
    (listed,) = admin.list_offsets(earliest).values()
    assert settle(listed).offset == 6
    offsets = httpx.get(f"{cluster.proxy_url(0)}/topics/{topic}/partitions/0/offsets").json()
    assert (offsets["beginning_offset"], offsets["end_offset"]) == (6, 10)

    settle(admin.delete_topics([topic], operation_timeout=TIMEOUT_S)[topic])
    assert rest_topic(cluster, topic).status_code == 404
    nodes = settle(admin.describe_cluster()).nodes
    assert len(nodes) == 3


async def test_confluent_admin_client_manages_a_topic_as_rest_shows_it(
    cluster: LocalCluster, bootstrap: str
) -> None:
    await asyncio.to_thread(confluent_admin_walk, cluster, bootstrap, unique("kadmin"))


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kcat", "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    return done.stdout


async def test_kcat_lists_metadata_produces_and_consumes(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic = unique("kcat")
    await create_topic(cluster, topic, partitions=1, replication_factor=3)
    listing = json.loads(await asyncio.to_thread(kcat, bootstrap, "-L", "-J", "-t", topic))
    assert sorted(b["id"] for b in listing["brokers"]) == [0, 1, 2]
    (described,) = listing["topics"]
    assert (described["topic"], len(described["partitions"][0]["replicas"])) == (topic, 3)
    lines = "".join(f"key{i}:value {i}\n" for i in range(5))
    await asyncio.to_thread(kcat, bootstrap, "-P", "-t", topic, "-p", "0", "-K:", stdin=lines)
    consumed = await asyncio.to_thread(
        kcat, bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %k %s\n"
    )
    assert consumed.splitlines() == [f"{i} key{i} value {i}" for i in range(5)]


def leader_of(cluster: LocalCluster, topic: str) -> int:
    (partition,) = rest_topic(cluster, topic).json()["partitions"]
    return int(partition["leader"])


def produce_numbers(bootstrap: str, topic: str, count: int, halfway: threading.Event) -> list[Any]:
    """Send 0..count-1 idempotently with acks=all, paced; set ``halfway`` at a third delivered."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 120_000,
        }
    )
    errors: list[Any] = []
    delivered = 0

    def report(error: Any, _message: Any) -> None:
        nonlocal delivered
        if error is not None:
            errors.append(error)
        delivered += 1
        if delivered >= count // 3:
            halfway.set()

    for n in range(count):
        producer.produce(topic, value=str(n).encode(), partition=0, on_delivery=report)
        producer.poll(0)
        time.sleep(0.002)  # pacing: the kill lands mid-stream, not after the last send
    assert producer.flush(120) == 0
    return errors


def read_numbers(bootstrap: str, topic: str, count: int) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: list[int] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value: Any = message.value()
            found.append(int(value))
        return found
    finally:
        consumer.close()


async def test_killing_the_leader_under_an_idempotent_producer_loses_and_doubles_nothing(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic, count = unique("leader-kill"), 3_000
    await create_topic(cluster, topic, partitions=1, replication_factor=3)
    leader = leader_of(cluster, topic)
    halfway = threading.Event()
    producing = asyncio.create_task(
        asyncio.to_thread(produce_numbers, bootstrap, topic, count, halfway)
    )
    assert await asyncio.to_thread(halfway.wait, TIMEOUT_S)
    assert not producing.done()
    cluster.kill(leader)
    errors = await producing
    assert errors == []
    numbers = await asyncio.to_thread(read_numbers, bootstrap, topic, count)
    assert numbers == list(range(count))
    assert leader_of(cluster, topic) != leader
