"""``TopicShareStateStore`` on a real cluster: etcd, a coordinator and three ``yak-broker``
processes, ``__yak_share_state`` created by the share-group admin API with the first share
group (16 partitions, RF 3, compacted, ``min.insync.replicas`` 2).

Each store here stands for one broker's: its own metadata cache on etcd and its own clients to
the leaders' internal listeners. A snapshot saved by one is loaded by another; then the state
partition's leader is killed with kill -9 and, after the failover, a store that never read the
topic and one that had read it both load the last acknowledged snapshot; a save after the
failover finds the new leader by itself.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from loadtest.local_cluster import LocalCluster, local_cluster, wait_for
from yak.api.share_groups import CreateShareGroupRequest
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd
from yak.metadata.cache import MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak_broker.share.state_store import SHARE_STATE_TOPIC, SharePartitionKey
from yak_broker.share.state_topic_clients import BrokerClients
from yak_broker.share.state_topic_view import state_partition
from yak_broker.share.topic_state_store import TopicShareStateStore

pytestmark = pytest.mark.integration

PARTITIONS = 16


@asynccontextmanager
async def broker_store(cluster: LocalCluster) -> AsyncIterator[TopicShareStateStore]:
    """A store as one broker has it: its own metadata cache and clients."""
    etcd = EtcdMetadataStore.from_url(cluster.etcd.endpoint)
    cache = MetadataCache(etcd, Keyspace(cluster.cluster_id))
    await cache.start()
    store = TopicShareStateStore(
        lambda: cache.snapshot, cache.wait_for, BrokerClients(timeout_s=10.0), timeout_ms=20_000
    )
    try:
        await store.start()
        yield store
    finally:
        await store.stop()
        await cache.stop()
        await etcd.aclose()


async def test_the_last_acknowledged_snapshot_survives_a_kill_9_of_its_leader(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    cluster_id = f"ss-{uuid.uuid4().hex[:10]}"
    key = SharePartitionKey("jobs", "orders", 0)
    others = {SharePartitionKey("jobs", "orders", n): b"other %d" % n for n in range(1, 40)}
    with local_cluster(tmp_path, etcd, cluster_id) as cluster:
        async with AdminClient(cluster.coordinator_url) as admin:
            await admin.create_share_group(CreateShareGroupRequest(name="jobs"))
            described = await wait_for(admin, SHARE_STATE_TOPIC, "full-isr")
            assert len(described.partitions) == PARTITIONS
            configs = (await admin.describe_topic(SHARE_STATE_TOPIC)).configs
            assert configs.get("cleanup.policy") == "compact"
            partition = state_partition(key, PARTITIONS)
            victim = described.partitions[partition].leader
            async with broker_store(cluster) as writer, broker_store(cluster) as reader:
                await writer.save({key: b"v1", **others})
                assert await reader.load(key) == b"v1"
                for other, value in list(others.items())[:5]:
                    assert await reader.load(other) == value
                await writer.save({key: b"v2"})
                await writer.save({key: b"v3"})  # the last acknowledged snapshot

                cluster.kill(victim)
                async with broker_store(cluster) as fresh:
                    assert await fresh.load(key) == b"v3"
                assert await reader.load(key) == b"v3"  # from where it had read

                await writer.save({key: b"v4"})  # finds the new leader by itself
                moved = await wait_for(admin, SHARE_STATE_TOPIC, "led")
                assert moved.partitions[partition].leader != victim
                async with broker_store(cluster) as fresh:
                    assert await fresh.load(key) == b"v4"
                    assert await fresh.load(SharePartitionKey("jobs", "orders", 1)) == b"other 1"
                await writer.delete(key)
                assert await reader.load(key) is None
