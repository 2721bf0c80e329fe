"""Two real coordinators on a real etcd: election, placement, forwarding and failover."""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from yak.clients.admin import AdminClient
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import ControllerRecord, PartitionState

pytestmark = pytest.mark.integration


async def stored_partitions(
    store: EtcdMetadataStore, ks: Keyspace, topic: str
) -> list[PartitionState]:
    result = await store.range_prefix(ks.topic_partitions_prefix(topic))
    return sorted((PartitionState.decode(kv.value) for kv in result.kvs), key=lambda s: s.partition)


async def test_failover_on_kill_and_on_sigterm(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1, 2, 3)
    c0 = await coordinators("c0")
    c1 = await coordinators("c1")
    by_id = {"c0": c0, "c1": c1}
    active_id, _ = await wait_for_controller([c0.url, c1.url])
    active = by_id[active_id]
    standby = c1 if active is c0 else c0

    # Created through the standby: forwarded to the active controller.
    async with AdminClient(standby.url) as admin:
        topic = await admin.create_topic("orders", partitions=6, replication_factor=2)
    assert [p.partition for p in topic.partitions] == list(range(6))
    states = await stored_partitions(etcd_store, keyspace, "orders")
    assert [s.partition for s in states] == list(range(6))
    assert Counter(s.leader for s in states) == {1: 2, 2: 2, 3: 2}
    assert all(len(set(s.replicas)) == 2 and s.isr == s.replicas for s in states)
    kv = await etcd_store.get(keyspace.controller)
    assert kv is not None
    first_epoch = ControllerRecord.decode(kv.value).epoch
    assert first_epoch == kv.create_revision

    # kill -9: the standby takes over once the lease expires (TTL 2 s).
    assert await active.signal_and_wait(signal.SIGKILL) == -signal.SIGKILL
    new_id, took = await wait_for_controller([standby.url], exclude=active_id)
    assert new_id == standby.node_id
    assert took < 6.0, f"takeover took {took:.1f} s"
    async with AdminClient(standby.url) as admin:
        after = await admin.create_topic("after-kill", partitions=2)
        assert [p.leader >= 1 for p in after.partitions] == [True, True]
        assert len((await admin.describe_topic("orders")).partitions) == 6
    kv = await etcd_store.get(keyspace.controller)
    assert kv is not None
    assert ControllerRecord.decode(kv.value).epoch > first_epoch

    # A third coordinator stands by; SIGTERM of the active hands over at once.
    c2 = await coordinators("c2")
    assert await standby.signal_and_wait(signal.SIGTERM) in (
        0,
        -signal.SIGTERM,
    )  # uvicorn re-raises
    new_id, took = await wait_for_controller([c2.url], exclude=standby.node_id)
    assert new_id == "c2"
    assert took < 1.5, f"takeover after SIGTERM took {took:.1f} s"
    async with AdminClient(c2.url) as admin:
        assert {t.name for t in (await admin.list_topics()).topics} == {"orders", "after-kill"}


async def test_broker_death_moves_leaders(
    coordinators, brokers, etcd_store, keyspace, wait_for_controller
) -> None:
    await brokers(1, 2)
    await brokers(3)  # on its own lease, so it can die alone
    c0 = await coordinators("c0")
    await wait_for_controller([c0.url])
    async with AdminClient(c0.url) as admin:
        await admin.create_topic("ha", partitions=3, replication_factor=3)
    await etcd_store.delete(keyspace.broker(3))  # broker 3's registration vanishes
    async with AdminClient(c0.url) as admin:
        for _ in range(100):
            topic = await admin.describe_topic("ha")
            if all(3 not in p.isr for p in topic.partitions):
                break
        else:
            pytest.fail(f"broker 3 still in an ISR: {topic.partitions}")
    for p in topic.partitions:
        assert p.leader in (1, 2)
        assert p.replicas[0] != 3 or p.leader_epoch == 1
