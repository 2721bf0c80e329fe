"""Controlled shutdown with real processes: etcd, a coordinator and three ``yak-broker``s.

SIGTERM to a broker that leads partitions of an RF-3 topic. etcd's history (a watch replayed
from the revision before the signal) must show, in this order: the broker's registration
re-put with ``shutting_down``; every partition it led moved to another broker with
``leader_epoch`` + 1 and ``partition_epoch`` + 1; only then the registration deleted (the
broker deregisters just before it exits). A partition with no other replica (RF 1) cannot be
handed over and must not hold the shutdown up for ``controlled_shutdown_timeout_s``.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from loadtest.local_cluster import local_cluster, wait_for
from yak.clients.admin import AdminClient
from yak.etcd_server import EmbeddedEtcd
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import Keyspace
from yak.metadata.models import BrokerRegistration, PartitionState
from yak.metadata.store import EventKind, WatchEvent

pytestmark = pytest.mark.integration

_CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0  # the broker's default


async def _history(
    store: EtcdMetadataStore, keyspace: Keyspace, after: int, until_key: str
) -> list[WatchEvent]:
    """etcd's events after revision ``after``, up to the deletion of ``until_key``."""
    events: list[WatchEvent] = []
    async with asyncio.timeout(10), store.watch_prefix(keyspace.root, after + 1) as watch:
        async for event in watch:
            events.append(event)
            if event.key == until_key.encode() and event.kind is EventKind.DELETE:
                return events
    raise AssertionError("the watch ended before the broker deregistered")


async def test_sigterm_hands_leaderships_over_before_the_broker_deregisters(
    etcd: EmbeddedEtcd, etcd_store: EtcdMetadataStore, cluster_id: str, tmp_path: Path
) -> None:
    keyspace = Keyspace(cluster_id)
    with local_cluster(tmp_path, etcd, cluster_id) as cluster:
        async with AdminClient(cluster.coordinator_url) as admin:
            await admin.create_topic("rf3", partitions=3, replication_factor=3)
            await admin.create_topic("rf1", partitions=3, replication_factor=1)
            before = await wait_for(admin, "rf3", "full-isr")
            await wait_for(admin, "rf1", "led")
            victim = before.partitions[0].leader
            led = {p.partition: p for p in before.partitions if p.leader == victim}
            rf1 = (await admin.describe_topic("rf1")).partitions
            solo = [p.partition for p in rf1 if p.leader == victim]  # one per broker
            revision = (await etcd_store.range_prefix(keyspace.root)).revision

            process = cluster.brokers[victim]
            started = time.monotonic()
            process.popen.send_signal(signal.SIGTERM)
            exit_code = await asyncio.to_thread(process.popen.wait, 30)
            took = time.monotonic() - started
            assert exit_code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled

            broker_key = keyspace.broker(victim)
            events = await _history(etcd_store, keyspace, revision, broker_key)
            marked = next(
                e.mod_revision
                for e in events
                if e.key == broker_key.encode()
                and e.kind is EventKind.PUT
                and BrokerRegistration.decode(e.value).shutting_down
            )
            deregistered = events[-1].mod_revision
            for partition, old in led.items():
                key = keyspace.partition("rf3", partition).encode()
                moved = next(
                    (e, state)
                    for e in events
                    if e.key == key and e.kind is EventKind.PUT
                    for state in [PartitionState.decode(e.value)]
                    if state.leader != victim
                )
                event, state = moved
                assert marked < event.mod_revision < deregistered
                assert state.leader >= 0
                assert state.leader_epoch == old.leader_epoch + 1
                assert state.partition_epoch == old.partition_epoch + 1
                assert victim in state.isr  # handed over in sync, not dropped as dead

            after = await admin.describe_topic("rf3")
            assert all(after.partitions[p].leader != victim for p in led)
            # RF 1 partitions cannot move: the broker did not wait for them.
            assert solo, "placement puts one RF-1 partition on each broker"
            assert took < _CONTROLLED_SHUTDOWN_TIMEOUT_S / 2, took
