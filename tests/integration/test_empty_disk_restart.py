"""Empty-disk restarts with real processes (issue 21 item 2): kill -9 a broker, delete its data
folder, start it again — its log is gone, and it must neither lead nor count as in sync until
it has caught up; no acknowledged record may be lost.

Two races, each of which loses acknowledged records without the data folder ids
(``docs/replication.md``, "Empty-disk restarts"):

- **the leader, back before its lease expired**: the new process serves while its registrar
  waits for the old lease (a TTL of 20 s here: the new process must be up within it), and the
  metadata still names it leader. Had it led its empty log, the followers — reconnecting to
  the same internal port — would have truncated to it, and one of them would have been
  elected with nothing (55 of 70 acknowledged records lost, measured without the fix). It
  announces its new folder on the old registration, so the controller elects a follower
  before the lease expires; it never leads its empty log; it catches up and rejoins the ISR
  under its new folder id.
- **the last ISR member**: the two followers died first, so the ISR shrank to the leader;
  then the leader died and came back on an empty disk. Electing it would have made the
  followers truncate everything when they came back. The partition stays offline; the
  operator's unclean election then picks a follower that kept its log, not the empty one.

Every partition state etcd held is recorded (``StateLog``): after the wipe, no state names
the wiped broker leader, or in the ISR, except under its new folder id.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from loadtest.local_cluster import (
    IdempotentProducer,
    LocalCluster,
    local_cluster,
    read_partition,
    wait_for,
)
from yak.api.admin import PartitionInfo
from yak.clients.admin import AdminClient
from yak.clients.broker import BrokerClient
from yak.errors import NotLeaderOrFollowerError
from yak.etcd_server import EmbeddedEtcd, free_ports
from yak.metadata.cache import ClusterSnapshot, MetadataCache
from yak.metadata.etcd_store import EtcdMetadataStore
from yak.metadata.keyspace import KeyKind, Keyspace, ParsedKey
from yak.metadata.models import NO_LEADER, PartitionState

pytestmark = pytest.mark.integration

TOPIC = "wiped"
BROKERS = (0, 1, 2)


class StateLog:
    """Every state of ``TOPIC``'s partition 0 that etcd held, in order (a watch)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._store = EtcdMetadataStore.from_url(cluster.etcd.endpoint)
        self._cache = MetadataCache(self._store, Keyspace(cluster.cluster_id), on_change=self._seen)
        self.states: list[PartitionState] = []

    def _seen(self, parsed: ParsedKey) -> None:
        if parsed.kind is KeyKind.PARTITION and parsed.topic == TOPIC:
            state = self._cache.snapshot.partitions.get((TOPIC, 0))
            if state is not None and (not self.states or self.states[-1] != state):
                self.states.append(state)

    async def registered(self, broker_id: int, folder: str) -> None:
        """Until the broker's registration names ``folder`` (the cache follows etcd)."""

        def names(snapshot: ClusterSnapshot) -> bool:
            registration = snapshot.brokers.get(broker_id)
            return registration is not None and registration.log_dir_id == folder

        await self._cache.wait_for(names, 10.0)

    async def offline(self) -> None:
        """Until the log has seen partition 0 without a leader: the admin API can say so before
        this watch delivers that state, which would then count as one written later."""

        def without_leader(snapshot: ClusterSnapshot) -> bool:
            state = snapshot.partitions.get((TOPIC, 0))
            return state is not None and state.leader == NO_LEADER

        await self._cache.wait_for(without_leader, 10.0)

    async def __aenter__(self) -> StateLog:
        await self._cache.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self._cache.stop()
        await self._store.aclose()


def start(cluster: LocalCluster, data_ports: dict[int, int], broker_id: int) -> None:
    """Start a broker on its fixed internal port, as a deployment configures it: a process
    restarted on the same port is reached by the followers of its old registration."""
    cluster.start_broker(broker_id, YAK_DATA_PORT=str(data_ports[broker_id]))


def folder_id(cluster: LocalCluster, broker_id: int) -> str:
    text = (cluster.folder / f"broker-{broker_id}" / "meta.properties").read_text()
    return dict(line.split("=", 1) for line in text.splitlines())["directory.id"]


def wipe(cluster: LocalCluster, broker_id: int) -> None:
    shutil.rmtree(cluster.folder / f"broker-{broker_id}")


async def produce(producer: IdempotentProducer, batches: int) -> None:
    for _ in range(batches):
        await producer.send_one()


async def all_acknowledged_are_there(
    cluster: LocalCluster, admin: AdminClient, producer: IdempotentProducer, timeout_s: float = 30.0
) -> None:
    """Every acknowledged record is read back from the partition's leader, within a bound.

    Leadership may still move once the ISR is full (the controller hands it back to the
    preferred replica), and a leader new in its epoch serves records only up to its high
    watermark, which stands where its followers last told it until they fetch from it: read
    from whoever leads now, again, until every acknowledged record is there or the bound
    passes. Only then is a record lost.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        described = await wait_for(admin, TOPIC, "full-isr", timeout_s=60)
        leader = described.partitions[0].leader
        try:
            async with BrokerClient(cluster.broker_url(leader)) as client:
                stored = dict(await read_partition(client, TOPIC, 0))
        except NotLeaderOrFollowerError as exc:  # leadership moved since the description
            seen = f"broker {leader}: {exc}"
            stored = {}
        else:
            seen = (
                f"broker {leader}: offsets {min(stored, default=None)}..{max(stored, default=None)}"
            )
        lost = [ack for ack in producer.acks if stored.get(ack.offset) != ack.value]
        if not lost:
            return
        assert time.monotonic() < deadline, (
            f"{len(lost)} of {len(producer.acks)} acknowledged records lost ({seen}): {lost[:3]}"
        )
        await asyncio.sleep(0.2)  # another process's high watermark: nothing local to wait on


async def until(
    admin: AdminClient, holds: Callable[[PartitionInfo], bool], what: str, timeout_s: float = 30.0
) -> None:
    """Poll the admin API (another process's state) until partition 0 satisfies ``holds``."""
    deadline = time.monotonic() + timeout_s
    while True:
        partition = (await admin.describe_topic(TOPIC)).partitions[0]
        if holds(partition):
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s ({partition})"
        await asyncio.sleep(0.1)


def only_under_the_new_folder(states: list[PartitionState], broker_id: int, new: str) -> None:
    for state in states:
        if state.leader == broker_id or broker_id in state.isr:
            assert state.isr_log_dirs.get(broker_id) == new, (
                f"broker {broker_id} leads or is in sync with a lost log: {state}"
            )


async def test_a_leader_back_on_an_empty_disk_before_its_lease_expired(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    cluster_id = f"ed-{uuid.uuid4().hex[:10]}"
    data_ports = dict(zip(BROKERS, free_ports(len(BROKERS)), strict=True))
    with local_cluster(tmp_path, etcd, cluster_id, brokers=0, lease_ttl_s=20) as cluster:
        for broker_id in BROKERS:
            start(cluster, data_ports, broker_id)
        async with (
            AdminClient(cluster.coordinator_url) as admin,
            StateLog(cluster) as history,
            contextlib.AsyncExitStack() as closing,
        ):
            await admin.create_topic(
                TOPIC, partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"}
            )
            described = await wait_for(admin, TOPIC, "full-isr")
            victim = described.partitions[0].leader
            old = folder_id(cluster, victim)
            producer = IdempotentProducer(cluster, admin, TOPIC, 0, producer_id=8_100)
            closing.push_async_callback(producer.aclose)  # on failure too
            await produce(producer, 40)
            stop = asyncio.Event()
            writing = asyncio.create_task(producer.run(stop, interval_s=0.02))
            await asyncio.sleep(0.5)
            cluster.kill(victim)
            wipe(cluster, victim)
            seen = len(history.states)
            restarted_at = time.monotonic()
            await asyncio.to_thread(start, cluster, data_ports, victim)  # waits for the lease
            print(f"wiped broker {victim} ready after {time.monotonic() - restarted_at:.1f} s")
            new = folder_id(cluster, victim)
            assert new != old
            await history.registered(victim, new)
            await wait_for(admin, TOPIC, "full-isr", timeout_s=60)
            await asyncio.sleep(0.5)
            stop.set()
            await writing
            await all_acknowledged_are_there(cluster, admin, producer)
            after = history.states[seen:]
            assert any(s.leader not in (victim, NO_LEADER) for s in after), after
            only_under_the_new_folder(after, victim, new)
            assert history.states[-1].isr_log_dirs[victim] == new
        log = (cluster.folder / "logs" / f"broker-{victim}.log").read_text()
        # The race was hit: the new process started while its old registration lived.
        assert "announced on the registration its previous process left" in log
        print("the metadata still named it leader:", "not leading wiped-0" in log)


async def test_the_last_isr_member_back_on_an_empty_disk_is_not_elected(
    etcd: EmbeddedEtcd, tmp_path: Path
) -> None:
    cluster_id = f"el-{uuid.uuid4().hex[:10]}"
    data_ports = dict(zip(BROKERS, free_ports(len(BROKERS)), strict=True))
    with local_cluster(tmp_path, etcd, cluster_id, brokers=0) as cluster:
        for broker_id in BROKERS:
            start(cluster, data_ports, broker_id)
        async with (
            AdminClient(cluster.coordinator_url) as admin,
            StateLog(cluster) as history,
            contextlib.AsyncExitStack() as closing,
        ):
            await admin.create_topic(
                TOPIC, partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"}
            )
            described = await wait_for(admin, TOPIC, "full-isr")
            last = described.partitions[0].leader
            others = [b for b in BROKERS if b != last]
            producer = IdempotentProducer(cluster, admin, TOPIC, 0, producer_id=8_200)
            closing.push_async_callback(producer.aclose)  # on failure too
            await produce(producer, 40)
            for broker_id in others:
                cluster.kill(broker_id)
            await until(admin, lambda p: p.isr == [last], "the ISR shrank to the leader")
            cluster.kill(last)
            await until(admin, lambda p: p.leader == NO_LEADER, "the partition went offline")
            await history.offline()
            wipe(cluster, last)
            seen = len(history.states)
            for broker_id in others:
                await asyncio.to_thread(start, cluster, data_ports, broker_id)
            await asyncio.to_thread(start, cluster, data_ports, last)
            new = folder_id(cluster, last)
            # The controller has seen the empty broker register: still no leader, for good.
            await asyncio.sleep(3 * cluster.lease_ttl_s)
            partition = (await admin.describe_topic(TOPIC)).partitions[0]
            assert (partition.leader, partition.isr) == (NO_LEADER, [last])
            only_under_the_new_folder(history.states[seen:], last, new)
            # The operator accepts an unclean election: a replica that kept its log leads.
            await admin.alter_topic_configs(
                TOPIC, set_configs={"unclean.leader.election.enable": "true"}
            )
            described = await wait_for(admin, TOPIC, "full-isr", timeout_s=60)
            unclean = next(s for s in history.states[seen:] if s.leader != NO_LEADER)
            assert unclean.leader in others, unclean
            await all_acknowledged_are_there(cluster, admin, producer)
            only_under_the_new_folder(history.states[seen:], last, new)
