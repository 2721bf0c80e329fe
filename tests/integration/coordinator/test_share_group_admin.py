"""Share-group administration on a real cluster: etcd, a coordinator, three brokers and a
rest-proxy as processes. A group is created through the proxy (the SDK), listed and described
at the coordinator (the typed AdminClient), the share state topic exists with its shape and
configs, bad inputs get their codes and write nothing, and deletion removes the group."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loadtest.local_cluster import LocalCluster, local_cluster
from yak.clients.admin import AdminClient
from yak.errors import GroupIdNotFoundError
from yak.etcd_server import EmbeddedEtcd
from yak.sdk.admin import AsyncAdmin

pytestmark = pytest.mark.integration

STATE_TOPIC = "__yak_share_state"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EmbeddedEtcd) -> Iterator[LocalCluster]:
    folder: Path = tmp_path_factory.mktemp("share-admin")
    with local_cluster(folder, etcd, f"sg-{uuid.uuid4().hex[:8]}", brokers=3) as running:
        running.start_proxy(0)
        yield running


async def test_share_group_lifecycle(cluster: LocalCluster) -> None:
    async with (
        AsyncAdmin(cluster.proxy_url(0)) as proxy,
        AdminClient(cluster.coordinator_url) as coordinator,
        httpx.AsyncClient(base_url=cluster.proxy_url(0), timeout=30) as raw,
    ):
        await proxy.create_topic("orders-dlq")
        created = await proxy.create_share_group(
            "orders", dead_letter_topic="orders-dlq", max_delivery_attempts=3
        )
        assert (created.dead_letter_topic, created.max_delivery_attempts) == ("orders-dlq", 3)

        # Another path: the coordinator's own admin API.
        assert await coordinator.describe_share_group("orders") == created
        listed = await coordinator.list_share_groups()
        assert [g.name for g in listed.share_groups] == ["orders"]

        state = await coordinator.describe_topic(STATE_TOPIC)
        assert (state.partition_count, state.replication_factor) == (16, 3)
        assert state.configs == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
        assert all(len(p.replicas) == 3 for p in state.partitions)

        refused = [
            ({"name": "bad name"}, 400, "INVALID_GROUP_ID"),
            ({"name": "x", "max_delivery_attempts": 0}, 400, "INVALID_CONFIG"),
            ({"name": "x", "lock_duration_ms": 3_600_001}, 400, "INVALID_CONFIG"),
            ({"name": "x", "dead_letter_topic": "missing"}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
            ({"name": "x", "dead_letter_topic": STATE_TOPIC}, 400, "INVALID_TOPIC_EXCEPTION"),
            ({"name": "orders"}, 409, "DUPLICATE_RESOURCE"),
        ]
        for body, status, code in refused:
            answer = await raw.post("/api/v1/share-groups", json=body)
            assert (answer.status_code, answer.json()["code"]) == (status, code), body
        user_topic = await raw.post("/api/v1/topics", json={"name": "__yak_mine"})
        assert (user_topic.status_code, user_topic.json()["code"]) == (
            400,
            "INVALID_TOPIC_EXCEPTION",
        )
        assert [g.name for g in (await coordinator.list_share_groups()).share_groups] == ["orders"]
        assert await coordinator.describe_share_group("orders") == created

        deleted = await proxy.delete_share_group("orders")
        assert deleted.name == "orders"
        with pytest.raises(GroupIdNotFoundError):
            await coordinator.describe_share_group("orders")
        assert (await proxy.list_share_groups()).share_groups == []
