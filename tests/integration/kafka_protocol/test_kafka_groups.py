"""Kafka consumer groups against a real cluster (etcd, a coordinator, 3 brokers, a rest-proxy;
one cluster for the module): kafka-python ``KafkaConsumer`` with a ``group_id`` — a rebalance
when a second member joins and when it leaves — commits, and the committed offsets are the ones
the REST API shows for the group; confluent-kafka ``Consumer.subscribe`` consumes and commits;
one kind of member per group: a REST member cannot join a group with live Kafka members (409
INCONSISTENT_GROUP_PROTOCOL) and a Kafka JoinGroup is refused (error 23) while REST members
hold the group. (Module name unique across the suite; the folder is not named ``kafka``.)"""

from __future__ import annotations

import asyncio
import datetime
import queue
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from kio.schema.find_coordinator.v4 import request as find4
from kio.schema.join_group.v5 import request as join5

with warnings.catch_warnings():
    # kafka-python 3 loads its schemas with importlib.resources.read_text (deprecated).
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
from loadtest.local_cluster import LocalCluster
from tests.integration.rest_proxy.conftest import create_topic, unique
from tests.unit.broker.kafka.kafka_test_client import KafkaTestConnection

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

PARTITIONS, PER_PARTITION = 3, 10
WAIT_S = 60.0


async def topic_with_records(cluster: LocalCluster, bootstrap: str) -> str:
    topic = unique("kgroup")
    await create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3)

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        try:
            for partition in range(PARTITIONS):
                for i in range(PER_PARTITION):
                    producer.send(topic, value=b"v%d" % i, partition=partition).get(timeout=30)
        finally:
            producer.close()

    await asyncio.to_thread(produce)
    return topic


class ConsumerThread:
    """A kafka-python group member confined to a thread of its own (the client is not
    thread-safe): it polls until closed, and tells waiters whenever its assignment or the
    records it read change."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.changed = threading.Condition()
        self.assignment: frozenset[int] = frozenset()
        self.read: dict[int, int] = {}  # partition -> records read
        self._commands: queue.Queue[Callable[[Any], None] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap, topic, group), daemon=True
        )
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, group: str) -> None:
        try:
            consumer = KafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=500,
            )
        except BaseException as exc:  # handed to the test thread
            self._error = exc
            return
        try:
            while True:
                try:
                    command = self._commands.get_nowait()
                except queue.Empty:
                    command = None
                else:
                    if command is None:
                        return
                    command(consumer)
                batches = consumer.poll(timeout_ms=100)
                with self.changed:
                    for tp, records in batches.items():
                        self.read[tp.partition] = self.read.get(tp.partition, 0) + len(records)
                    self.assignment = frozenset(tp.partition for tp in consumer.assignment())
                    self.changed.notify_all()
        except BaseException as exc:  # handed to the test thread
            self._error = exc
        finally:
            consumer.close()  # LeaveGroup
            with self.changed:
                self.assignment = frozenset()
                self.changed.notify_all()

    def wait(self, predicate: Callable[[ConsumerThread], bool], what: str) -> None:
        with self.changed:
            ok = self.changed.wait_for(lambda: predicate(self) or self._error is not None, WAIT_S)
        assert self._error is None, self._error
        assert ok, f"{what}: assignment {set(self.assignment)}, read {self.read}"

    def run(self, command: Callable[[Any], None]) -> None:
        done = threading.Event()

        def wrapped(consumer: Any) -> None:
            command(consumer)
            done.set()

        self._commands.put(wrapped)
        assert done.wait(WAIT_S)

    def close(self) -> None:
        self._commands.put(None)
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive()


async def rest_committed(cluster: LocalCluster, group: str) -> dict[int, int | None]:
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        answer = await proxy.get(f"/api/v1/groups/{group}")
    assert answer.status_code == 200, answer.text
    return {p["partition"]: p["committed_offset"] for p in answer.json()["partitions"]}


async def rest_join(cluster: LocalCluster, group: str, topic: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        return await proxy.post(
            f"/api/v1/groups/{group}/members", json={"member_id": "rest-1", "topics": [topic]}
        )


async def kafka_join_error(bootstrap: str, group: str) -> int:
    """A raw JoinGroup v5 at the group's coordinator (with the id MEMBER_ID_REQUIRED gives):
    its error code."""
    _host, port = bootstrap.split(",")[0].rsplit(":", 1)
    first = await KafkaTestConnection.open(int(port))
    try:
        find = find4.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))  # type: ignore[arg-type]
        (found,) = (await first.call(10, 4, find)).coordinators
        assert found.error_code == 0, found
    finally:
        await first.close()
    coordinator = await KafkaTestConnection.open(found.port)
    try:
        member_id, error = "", 79
        while error == 79:  # MEMBER_ID_REQUIRED: come back with the id given
            join = join5.JoinGroupRequest(
                group_id=group,  # type: ignore[arg-type]
                session_timeout=datetime.timedelta(seconds=10),  # type: ignore[arg-type]
                rebalance_timeout=datetime.timedelta(seconds=10),  # type: ignore[arg-type]
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(join5.JoinGroupRequestProtocol(name="range", metadata=b""),),
            )
            answer = await coordinator.call(11, 5, join)
            member_id, error = answer.member_id, int(answer.error_code)
        return error
    finally:
        await coordinator.close()


async def test_kafka_python_group_rebalances_commits_and_excludes_rest_members(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic = await topic_with_records(cluster, bootstrap)
    group = unique("kp-group")
    everything = frozenset(range(PARTITIONS))
    first = ConsumerThread(bootstrap, topic, group)
    second: ConsumerThread | None = None
    try:
        await asyncio.to_thread(
            first.wait,
            lambda c: (
                c.assignment == everything and sum(c.read.values()) == PARTITIONS * PER_PARTITION
            ),
            "the only member reads every partition",
        )
        await asyncio.to_thread(first.run, lambda consumer: consumer.commit())
        assert await rest_committed(cluster, group) == dict.fromkeys(everything, PER_PARTITION)

        refused = await rest_join(cluster, group, topic)
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "INCONSISTENT_GROUP_PROTOCOL"

        second = ConsumerThread(bootstrap, topic, group)
        await asyncio.to_thread(second.wait, lambda c: bool(c.assignment), "the joiner's share")
        await asyncio.to_thread(
            first.wait,
            lambda c: c.assignment == everything - second.assignment and bool(c.assignment),
            "a rebalance when a member joins",
        )
        await asyncio.to_thread(second.close)
        await asyncio.to_thread(
            first.wait, lambda c: c.assignment == everything, "a rebalance when it leaves"
        )
    finally:
        if second is not None:
            await asyncio.to_thread(second.close)
        await asyncio.to_thread(first.close)

    # The group is empty again (no marker): either kind may take it, from the same offsets.
    joined = await rest_join(cluster, group, topic)
    assert joined.status_code in (200, 201), joined.text
    assert await kafka_join_error(bootstrap, group) == 23  # INCONSISTENT_GROUP_PROTOCOL
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        left = await proxy.delete(f"/api/v1/groups/{group}/members/rest-1")
    assert left.status_code in (200, 204), left.text
    assert await rest_committed(cluster, group) == dict.fromkeys(everything, PER_PARTITION)


async def test_confluent_kafka_subscribes_consumes_and_commits(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic = await topic_with_records(cluster, bootstrap)
    group = unique("ck-group")

    def consume() -> int:
        consumer = ConfluentConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe([topic])
            read, deadline = 0, time.monotonic() + WAIT_S
            while read < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                read += 1
            consumer.commit(asynchronous=False)
            return read
        finally:
            consumer.close()

    assert await asyncio.to_thread(consume) == PARTITIONS * PER_PARTITION
    committed = await rest_committed(cluster, group)
    assert committed == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
