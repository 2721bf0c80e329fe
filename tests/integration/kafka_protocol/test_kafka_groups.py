"""Kafka consumer groups against a real cluster (etcd, a coordinator, 3 brokers, a rest-proxy;
one cluster for the module). For each of confluent-kafka, kafka-python and aiokafka
(parametrised by client): a member subscribes and reads every partition, commits, and the
committed offsets are the ones the REST API shows for the group; a second member joins (a
rebalance splits the partitions, and it resumes at the committed offsets) and leaves (a
rebalance gives everything back). One kind of member per group: a REST member cannot join a
group with live Kafka members (409 INCONSISTENT_GROUP_PROTOCOL) and a Kafka JoinGroup is refused
(error 23) while REST members hold the group. (Module name unique across the suite; the folder
is not named ``kafka``.)"""

from __future__ import annotations

import asyncio
import datetime
import queue
import threading
import warnings
from collections.abc import Callable
from typing import Protocol

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer as ConfluentConsumer
from kio.schema.find_coordinator.v4 import request as find4
from kio.schema.join_group.v5 import request as join5

with warnings.catch_warnings():
    # kafka-python 3 loads its schemas with importlib.resources.read_text (deprecated).
    warnings.filterwarnings("ignore", "(read|open)_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
from loadtest.local_cluster import LocalCluster
from tests.integration.kafka_protocol.client_io import CLIENTS
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


class Member(Protocol):
    """One group member of one client, used from one thread only."""

    def poll(self) -> dict[int, int]:
        """Records read by partition within ~100 ms."""
        ...

    def assignment(self) -> frozenset[int]: ...

    def commit(self) -> None:
        """Commit the positions read (synchronously)."""
        ...

    def close(self) -> None:
        """Leave the group (LeaveGroup) and release the client."""
        ...


class KafkaPythonMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self._consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )

    def poll(self) -> dict[int, int]:
        batches = self._consumer.poll(timeout_ms=100)
        return {tp.partition: len(records) for tp, records in batches.items()}

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self._consumer.assignment())

    def commit(self) -> None:
        self._consumer.commit()

    def close(self) -> None:
        self._consumer.close()


class ConfluentMember:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self._consumer = ConfluentConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 500,
            }
        )
        self._consumer.subscribe([topic])

    def poll(self) -> dict[int, int]:
        read: dict[int, int] = {}
        for message in self._consumer.consume(num_messages=500, timeout=0.1):
            assert message.error() is None, message.error()
            partition = message.partition()
            assert partition is not None
            read[partition] = read.get(partition, 0) + 1
        return read

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self._consumer.assignment())

    def commit(self) -> None:
        self._consumer.commit(asynchronous=False)

    def close(self) -> None:
        self._consumer.close()


class AiokafkaMember:
    """aiokafka on an event loop of the member's own thread (``asyncio.Runner``): the loop
    runs, heartbeats included, whenever the member polls, commits or closes."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self._runner = asyncio.Runner()

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=500,
            )
            await consumer.start()
            return consumer

        self._consumer = self._runner.run(start())

    def poll(self) -> dict[int, int]:
        batches = self._runner.run(self._consumer.getmany(timeout_ms=100))
        return {tp.partition: len(records) for tp, records in batches.items()}

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self._consumer.assignment())

    def commit(self) -> None:
        self._runner.run(self._consumer.commit())

    def close(self) -> None:
        try:
            self._runner.run(self._consumer.stop())
        finally:
            self._runner.close()


MEMBERS: dict[str, Callable[[str, str, str], Member]] = {
    "confluent-kafka": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AiokafkaMember,
}


class ConsumerThread:
    """A group member of ``client`` confined to a thread of its own (the clients are not
    thread-safe): it polls until closed, and tells waiters whenever its assignment or the
    records it read change."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, client: str = "kafka-python"
    ) -> None:
        self.changed = threading.Condition()
        self.assignment: frozenset[int] = frozenset()
        self.read: dict[int, int] = {}  # partition -> records read
        self._commands: queue.Queue[Callable[[Member], None] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(MEMBERS[client], bootstrap, topic, group), daemon=True
        )
        self._thread.start()

    def _run(
        self, make: Callable[[str, str, str], Member], bootstrap: str, topic: str, group: str
    ) -> None:
        try:
            member = make(bootstrap, topic, group)
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
                    command(member)
                read = member.poll()
                with self.changed:
                    for partition, count in read.items():
                        self.read[partition] = self.read.get(partition, 0) + count
                    self.assignment = member.assignment()
                    self.changed.notify_all()
        except BaseException as exc:  # handed to the test thread
            self._error = exc
        finally:
            member.close()  # LeaveGroup
            with self.changed:
                self.assignment = frozenset()
                self.changed.notify_all()

    def wait(self, predicate: Callable[[ConsumerThread], bool], what: str) -> None:
        with self.changed:
            ok = self.changed.wait_for(lambda: predicate(self) or self._error is not None, WAIT_S)
        assert self._error is None, self._error
        assert ok, f"{what}: assignment {set(self.assignment)}, read {self.read}"

    def run(self, command: Callable[[Member], None]) -> None:
        done = threading.Event()

        def wrapped(member: Member) -> None:
            command(member)
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


@pytest.mark.parametrize("client", CLIENTS)
async def test_group_rebalances_when_a_member_joins_and_leaves_and_commits(
    cluster: LocalCluster, bootstrap: str, client: str
) -> None:
    topic = await topic_with_records(cluster, bootstrap)
    group = unique(f"{client}-group")
    everything = frozenset(range(PARTITIONS))
    first = ConsumerThread(bootstrap, topic, group, client)
    second: ConsumerThread | None = None
    try:
        await asyncio.to_thread(
            first.wait,
            lambda c: (
                c.assignment == everything and sum(c.read.values()) == PARTITIONS * PER_PARTITION
            ),
            "the only member reads every partition",
        )
        await asyncio.to_thread(first.run, lambda member: member.commit())
        assert await rest_committed(cluster, group) == dict.fromkeys(everything, PER_PARTITION)

        second = ConsumerThread(bootstrap, topic, group, client)
        await asyncio.to_thread(second.wait, lambda c: bool(c.assignment), "the joiner's share")
        await asyncio.to_thread(
            first.wait,
            lambda c: c.assignment == everything - second.assignment and bool(c.assignment),
            "a rebalance when a member joins",
        )
        assert sum(second.read.values()) == 0  # it resumed at the committed offsets
        await asyncio.to_thread(second.close)
        await asyncio.to_thread(
            first.wait, lambda c: c.assignment == everything, "a rebalance when it leaves"
        )
    finally:
        if second is not None:
            await asyncio.to_thread(second.close)
        await asyncio.to_thread(first.close)
    assert sum(first.read.values()) == PARTITIONS * PER_PARTITION  # and nothing read twice


async def test_kafka_and_rest_members_never_share_a_group(
    cluster: LocalCluster, bootstrap: str
) -> None:
    topic = await topic_with_records(cluster, bootstrap)
    group = unique("kp-group")
    everything = frozenset(range(PARTITIONS))
    member = ConsumerThread(bootstrap, topic, group)
    try:
        await asyncio.to_thread(
            member.wait,
            lambda c: sum(c.read.values()) == PARTITIONS * PER_PARTITION,
            "the only member reads every partition",
        )
        await asyncio.to_thread(member.run, lambda m: m.commit())
        refused = await rest_join(cluster, group, topic)
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "INCONSISTENT_GROUP_PROTOCOL"
    finally:
        await asyncio.to_thread(member.close)

    # The group is empty again (no marker): either kind may take it, from the same offsets.
    joined = await rest_join(cluster, group, topic)
    assert joined.status_code in (200, 201), joined.text
    assert await kafka_join_error(bootstrap, group) == 23  # INCONSISTENT_GROUP_PROTOCOL
    async with httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as proxy:
        left = await proxy.delete(f"/api/v1/groups/{group}/members/rest-1")
    assert left.status_code in (200, 204), left.text
    assert await rest_committed(cluster, group) == dict.fromkeys(everything, PER_PARTITION)
