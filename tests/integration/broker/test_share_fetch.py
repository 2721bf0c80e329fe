"""ShareFetch and ShareAcknowledge at a partition's leader on a real cluster (etcd, a
coordinator, three brokers as processes; the share group and its dead-letter topic created
through the coordinator's admin API, snapshots in the real ``__yak_share_state``): records
acquired, accepted, released and redelivered with a higher count, rejected into the
dead-letter topic with its headers; an unknown group is refused per partition; a deleted
group's state gets its tombstone, and a group created again under its name starts fresh."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.api.share_groups import CreateShareGroupRequest
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import NotLeaderOrFollowerError
from yak.etcd_server import EmbeddedEtcd
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import BrokerRegistration
from yak.partitioner import partition_for_key
from yak.protocol import kafka_share as ks
from yak.record import RecordInput, decode_batches, encode_batch
from yak_broker.share.state_store import SHARE_STATE_TOPIC, SharePartitionKey
from yak_broker.share.topic_ids import topic_uuid

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("share-fetch")
    with local_cluster(folder, etcd, f"sf-{uuid.uuid4().hex[:8]}", brokers=3) as running:
        yield running


async def _leader_client(cluster: LocalCluster, broker_id: int) -> BrokerClient:
    store = EtcdMetadataStore.from_url(cluster.etcd.endpoint)
    try:
        raw = await store.get(Keyspace(cluster.cluster_id).broker(broker_id))
        assert raw is not None
        registration = BrokerRegistration.decode(raw.value)
    finally:
        await store.aclose()
    return BrokerClient(registration.url, timeout_s=30, data_port=registration.data_port)


async def _produce(broker: BrokerClient, topic: str, values: list[bytes]) -> None:
    """Append to partition 0 at acks=all once its new leader has installed the replica (it
    refuses with NOT_LEADER_OR_FOLLOWER, "not ready", until then, as Kafka's does)."""
    batch = encode_batch([RecordInput(None, v) for v in values])
    async with asyncio.timeout(15):
        while True:
            try:
                await broker.produce_one(topic, 0, batch, acks=-1)
                return
            except NotLeaderOrFollowerError:
                await asyncio.sleep(0.05)  # another process's start-up: no event to wait on


def _acks(topic_id: uuid.UUID, first: int, last: int, kind: ks.AckType) -> ks.SharePartitionAcks:
    return ks.SharePartitionAcks(topic_id, 0, (ks.AckBatch(first, last, (int(kind),)),))


async def test_acquire_acknowledge_redeliver_and_dead_letter(cluster: LocalCluster) -> None:
    async with AdminClient(cluster.coordinator_url) as admin:
        await admin.create_topic("jobs-dlq", replication_factor=3)
        described = await admin.create_topic("jobs", replication_factor=3)
        await admin.create_share_group(
            CreateShareGroupRequest(
                name="workers",
                dead_letter_topic="jobs-dlq",
                max_delivery_attempts=2,
                offset_reset="earliest",
            )
        )
    topic_id = topic_uuid(described.topic_id)
    assert topic_id is not None
    leader = described.partitions[0].leader
    async with await _leader_client(cluster, leader) as broker:
        await _produce(broker, "jobs", [f"job-{i}".encode() for i in range(3)])

        async def fetch(member: str, *acks: ks.SharePartitionAcks) -> ks.ShareFetchedPartition:
            partition = acks[0] if acks else ks.SharePartitionAcks(topic_id, 0)
            request = ks.ShareFetchRequest("workers", member, (partition,), max_wait_ms=2_000)
            (answer,) = (await broker.share_fetch(request)).partitions
            assert answer.error is None, answer.error
            return answer

        first = await fetch("m1")
        assert first.acquired == (ks.AcquiredRecords(0, 2, 1),)
        values = [r.value for b in decode_batches(bytes(first.records)) for r in b.records]
        assert values == [b"job-0", b"job-1", b"job-2"]
        (accepted,) = await broker.share_acknowledge(
            ks.ShareAcknowledgeRequest("workers", "m1", (_acks(topic_id, 0, 0, ks.AckType.ACCEPT),))
        )
        assert accepted.error is None
        # release 1 and 2 inside the next fetch: they come back to m1, count 2
        again = await fetch("m1", _acks(topic_id, 1, 2, ks.AckType.RELEASE))
        assert again.ack_error is None
        assert again.acquired == (ks.AcquiredRecords(1, 2, 2),)
        (late,) = await broker.share_acknowledge(
            ks.ShareAcknowledgeRequest("workers", "m2", (_acks(topic_id, 1, 1, ks.AckType.ACCEPT),))
        )
        assert late.error is not None
        assert late.error.code == "INVALID_RECORD_STATE"
        (done,) = await broker.share_acknowledge(
            ks.ShareAcknowledgeRequest(
                "workers",
                "m1",
                (
                    ks.SharePartitionAcks(
                        topic_id,
                        0,
                        (ks.AckBatch(1, 2, (int(ks.AckType.ACCEPT), int(ks.AckType.REJECT))),),
                    ),
                ),
            )
        )
        assert done.error is None

        unknown = ks.ShareFetchRequest("nobody", "m1", (ks.SharePartitionAcks(topic_id, 0),))
        (refused,) = (await broker.share_fetch(unknown)).partitions
        assert refused.error is not None
        assert refused.error.code == "GROUP_ID_NOT_FOUND"

    async with AdminClient(cluster.coordinator_url) as admin:
        dlq_leader = (await admin.describe_topic("jobs-dlq")).partitions[0].leader
    async with await _leader_client(cluster, dlq_leader) as dlq:
        copies = []
        for _ in range(20):  # produced in the background after the reject: long polls
            fetched = await dlq.fetch_one("jobs-dlq", 0, 0, max_wait_ms=1_000)
            copies = [r for b in decode_batches(bytes(fetched.records)) for r in b.records]
            if copies:
                break
        (copy,) = copies
        headers = dict(copy.headers)
        assert copy.value == b"job-2"
        assert headers["yak-dlq-reason"] == b"rejected"
        assert headers["yak-dlq-offset"] == b"2"
        assert headers["yak-dlq-delivery-count"] == b"2"
        assert headers["yak-dlq-group"] == b"workers"


async def _state_values(
    cluster: LocalCluster, key: SharePartitionKey, *, until_tombstone: bool = False
) -> list[bytes | None]:
    """Every value written for ``key`` in ``__yak_share_state``, in order (None: tombstone);
    ``until_tombstone``: long-poll at the end until the last one is a tombstone."""
    async with AdminClient(cluster.coordinator_url) as admin:
        state = await admin.describe_topic(SHARE_STATE_TOPIC)
    partition = partition_for_key(key.encode(), len(state.partitions))
    values: list[bytes | None] = []
    async with await _leader_client(cluster, state.partitions[partition].leader) as leader:
        offset = 0
        waiting = False
        while True:
            fetched = await leader.fetch_one(
                SHARE_STATE_TOPIC, partition, offset, max_wait_ms=1_000 if waiting else 0
            )
            batches = list(decode_batches(bytes(fetched.records), from_offset=offset))
            for batch in batches:
                values += [r.value for r in batch.records if r.key == key.encode()]
                offset = batch.header.base_offset + batch.header.last_offset_delta + 1
            if not batches:
                if not until_tombstone or (values and values[-1] is None):
                    return values
                waiting = True


async def test_a_deleted_group_is_tombstoned_and_its_name_starts_fresh(
    cluster: LocalCluster,
) -> None:
    async with AdminClient(cluster.coordinator_url) as admin:
        described = await admin.create_topic("recycled-jobs", replication_factor=3)
        first = await admin.create_share_group(
            CreateShareGroupRequest(name="recycled", offset_reset="earliest")
        )
    topic_id = topic_uuid(described.topic_id)
    assert topic_id is not None
    wanted = ks.SharePartitionAcks(topic_id, 0)
    key = SharePartitionKey("recycled", "recycled-jobs", 0, first.created_at_ms)
    async with await _leader_client(cluster, described.partitions[0].leader) as broker:
        await _produce(broker, "recycled-jobs", [f"job-{i}".encode() for i in range(3)])

        async def acquire(member: str) -> ks.ShareFetchedPartition:
            request = ks.ShareFetchRequest("recycled", member, (wanted,), max_wait_ms=200)
            async with asyncio.timeout(10):  # until the leader's metadata shows the group
                while True:
                    (answer,) = (await broker.share_fetch(request)).partitions
                    if answer.error is None or answer.error.code != "GROUP_ID_NOT_FOUND":
                        return answer
                    await asyncio.sleep(0.05)  # another process's metadata: nothing to await

        taken = await acquire("m1")
        assert taken.acquired == (ks.AcquiredRecords(0, 2, 1),)
        accept = _acks(topic_id, 0, 2, ks.AckType.ACCEPT)
        (accepted,) = await broker.share_acknowledge(
            ks.ShareAcknowledgeRequest("recycled", "m1", (accept,))
        )
        assert accepted.error is None
        assert (await _state_values(cluster, key))[-1] is not None

        async with AdminClient(cluster.coordinator_url) as admin:
            await admin.delete_share_group("recycled")
            async with asyncio.timeout(20):  # the leader's sweep, in the background
                await _state_values(cluster, key, until_tombstone=True)
            second = await admin.create_share_group(
                CreateShareGroupRequest(name="recycled", offset_reset="earliest")
            )
        assert second.created_at_ms != first.created_at_ms
        again = await acquire("m2")
        assert again.error is None, again.error
        assert again.acquired == (ks.AcquiredRecords(0, 2, 1),)  # nothing of the old group
